// The memory page's only script: ask before destructive actions. Everything else is plain
// HTML forms, so the page works without it.
document.addEventListener("submit", function (event) {
  var form = event.target;
  var question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
