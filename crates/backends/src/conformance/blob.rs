//! The conformance suite of the blob stores, one function per behaviour, checked the same way
//! against every implementation (the test binary stamps each into its own test per store). Each
//! behaviour works under its own random key prefix, so runs can share a bucket, and removes what
//! it wrote when it passes.

use std::fmt::Debug;

use bytes::Bytes;
use futures::StreamExt;

use crate::blob::{BlobError, BlobStore, ByteStream};

/// Twelve MiB: more than one multipart part and many stream chunks.
const BIG: usize = 12 * 1024 * 1024;

/// One behaviour's run: the store passed its check, and the run writes under its own random key
/// prefix, which it empties when the behaviour passed.
struct Run<'s> {
    store: &'s dyn BlobStore,
    prefix: String,
}

impl<'s> Run<'s> {
    async fn start(store: &'s dyn BlobStore) -> Self {
        let name = store.name();
        store
            .check()
            .await
            .unwrap_or_else(|err| panic!("[{name}] check() should succeed on a usable store: {err}"));
        Self {
            store,
            prefix: format!("conformance-{}/", uuid::Uuid::new_v4().simple()),
        }
    }

    fn key(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// Leaves the shared bucket as it was found.
    async fn finish(self) {
        let (name, prefix) = (self.store.name(), &self.prefix);
        for leftover in must(name, "list(run prefix)", self.store.list(prefix).await) {
            must(name, "delete(leftover)", self.store.delete(&leftover).await);
        }
        assert_eq!(
            must(name, "list(run prefix)", self.store.list(prefix).await),
            Vec::<String>::new(),
            "[{name}] every blob of the run should be deleted"
        );
    }
}

/// Binary and UTF-8 content, overwrites and empty blobs read back exactly, with their sizes.
pub async fn blobs_round_trip_byte_for_byte(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let binary: Bytes = (0..=255u8).cycle().take(4096).collect::<Vec<_>>().into();
    let binary_key = key("round/binary.bin");
    must(name, "put(binary)", store.put(&binary_key, binary.clone()).await);
    assert_bytes(
        name,
        "binary bytes (every byte value) should come back unchanged",
        &must(name, "get(binary)", store.get(&binary_key).await),
        &binary,
    );
    assert_eq!(
        must(name, "size(binary)", store.size(&binary_key).await),
        Some(binary.len() as u64),
        "[{name}] size() should give the byte length"
    );

    let text = "记忆平台：工具输出完整保存，按需分段读取。🌿 Ünïcødé";
    let text_key = key("round/text.txt");
    must(name, "put(text)", store.put(&text_key, Bytes::from(text)).await);
    let back = must(name, "get(text)", store.get(&text_key).await);
    assert_eq!(
        std::str::from_utf8(&back).ok(),
        Some(text),
        "[{name}] UTF-8 Chinese text should come back unchanged"
    );
    assert_eq!(
        must(name, "size(text)", store.size(&text_key).await),
        Some(text.len() as u64),
        "[{name}] size() counts bytes, not characters"
    );

    // A shorter overwrite must not keep the old tail.
    must(
        name,
        "put(overwrite)",
        store.put(&binary_key, Bytes::from_static(b"short")).await,
    );
    assert_eq!(
        must(name, "get(overwritten)", store.get(&binary_key).await),
        Bytes::from_static(b"short"),
        "[{name}] an overwrite should replace the whole blob"
    );
    assert_eq!(
        must(name, "size(overwritten)", store.size(&binary_key).await),
        Some(5),
        "[{name}] size() should follow an overwrite"
    );

    let empty_key = key("round/empty");
    must(name, "put(empty)", store.put(&empty_key, Bytes::new()).await);
    assert_eq!(
        must(name, "size(empty)", store.size(&empty_key).await),
        Some(0),
        "[{name}] an empty blob exists with size 0"
    );
    assert!(
        must(name, "get(empty)", store.get(&empty_key).await).is_empty(),
        "[{name}] an empty blob reads as empty"
    );
    assert!(
        must(name, "get_range(empty)", store.get_range(&empty_key, 0, 10).await).is_empty(),
        "[{name}] any range of an empty blob is empty"
    );
    let chunks = collect(
        name,
        must(name, "get_stream(empty)", store.get_stream(&empty_key, 16).await),
    )
    .await;
    assert!(
        chunks.iter().all(Bytes::is_empty),
        "[{name}] an empty blob streams no bytes"
    );
    run.finish().await;
}

/// Ranges give the bytes they cover, clamped at the end; empty when they start past it.
pub async fn ranges_read_the_bytes_they_cover(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let data = Bytes::from(pattern(1000, 7));
    let range_key = key("range/data.bin");
    must(name, "put(range data)", store.put(&range_key, data.clone()).await);
    let cases: [(u64, u64, &str, std::ops::Range<usize>); 8] = [
        (0, 10, "the start", 0..10),
        (100, 200, "the middle", 100..200),
        (990, 1000, "the end", 990..1000),
        (995, 2000, "a range past the end (clamped)", 995..1000),
        (0, u64::MAX, "everything (clamped)", 0..1000),
        (1000, 1010, "a range starting at the end", 0..0),
        (5000, 6000, "a range starting past the end", 0..0),
        (10, 10, "an empty range", 0..0),
    ];
    for (start, end, what, expected) in cases {
        let got = must(name, "get_range", store.get_range(&range_key, start, end).await);
        assert_bytes(
            name,
            &format!("get_range({start}, {end}) should give {what}"),
            &got,
            &data[expected],
        );
    }
    assert!(
        must(name, "get_range(reversed)", store.get_range(&range_key, 20, 10).await).is_empty(),
        "[{name}] a range whose start is after its end is empty"
    );
    run.finish().await;
}

/// A 12 MiB blob reads back whole, as a stream of chunks and in ranges across part boundaries.
pub async fn big_blobs_read_back_whole_in_ranges_and_streams(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let big = Bytes::from(pattern(BIG, 42));
    let big_key = key("big/put.bin");
    must(name, "put(12 MiB)", store.put(&big_key, big.clone()).await);
    assert_eq!(
        must(name, "size(12 MiB)", store.size(&big_key).await),
        Some(BIG as u64),
        "[{name}] size() of the 12 MiB blob"
    );
    assert_bytes(
        name,
        "the 12 MiB blob should read back byte for byte",
        &must(name, "get(12 MiB)", store.get(&big_key).await),
        &big,
    );

    let chunk_size = 1024 * 1024 + 17;
    let chunks = collect(
        name,
        must(name, "get_stream(12 MiB)", store.get_stream(&big_key, chunk_size).await),
    )
    .await;
    assert!(
        chunks.len() > 1,
        "[{name}] 12 MiB in chunks of about 1 MiB should come in several chunks, got {}",
        chunks.len()
    );
    assert!(
        chunks
            .iter()
            .all(|chunk| !chunk.is_empty() && chunk.len() <= 2 * chunk_size),
        "[{name}] stream chunks should be non-empty and about {chunk_size} bytes, got sizes {:?}",
        chunks.iter().map(Bytes::len).collect::<Vec<_>>()
    );
    assert_bytes(
        name,
        "get_stream chunks should reassemble the 12 MiB blob exactly",
        &chunks.concat(),
        &big,
    );

    // Ranges across the 5 MiB and 8 MiB marks, where multipart part boundaries fall.
    for boundary in [5 * 1024 * 1024, 8 * 1024 * 1024] {
        let (start, end) = (boundary - 100, boundary + 100);
        assert_bytes(
            name,
            &format!("get_range across byte {boundary} of the 12 MiB blob"),
            &must(
                name,
                "get_range(12 MiB)",
                store.get_range(&big_key, start as u64, end as u64).await,
            ),
            &big[start..end],
        );
    }
    run.finish().await;
}

/// A blob written from a stream of uneven chunks (big, small, empty) reads back byte for byte.
pub async fn streamed_writes_store_what_they_stream(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let big = Bytes::from(pattern(BIG, 99));
    let stream_key = key("big/streamed.bin");
    let written = must(
        name,
        "put_stream(12 MiB, uneven chunks)",
        store.put_stream(&stream_key, uneven(&big), BIG as u64).await,
    );
    assert_eq!(
        written, BIG as u64,
        "[{name}] put_stream should return the size written"
    );
    assert_eq!(
        must(name, "size(streamed)", store.size(&stream_key).await),
        Some(BIG as u64),
        "[{name}] size() of the streamed blob"
    );
    assert_bytes(
        name,
        "a blob written from uneven chunks should read back byte for byte",
        &must(name, "get(streamed)", store.get(&stream_key).await),
        &big,
    );

    let small_key = key("stream/small.txt");
    let small = chunks_of(&[b"hello ", b"", "世界".as_bytes()]);
    let written = must(name, "put_stream(small)", store.put_stream(&small_key, small, 12).await);
    assert_eq!(written, 12, "[{name}] a content of exactly max_bytes is allowed");
    assert_eq!(
        must(name, "get(small streamed)", store.get(&small_key).await),
        Bytes::from("hello 世界"),
        "[{name}] a small streamed blob reads back"
    );

    let empty_key = key("stream/empty");
    let written = must(
        name,
        "put_stream(empty)",
        store.put_stream(&empty_key, futures::stream::empty().boxed(), 0).await,
    );
    assert_eq!(written, 0, "[{name}] an empty stream writes 0 bytes");
    assert_eq!(
        must(name, "size(empty streamed)", store.size(&empty_key).await),
        Some(0),
        "[{name}] an empty stream still creates the blob"
    );
    run.finish().await;
}

/// A streamed write over its limit or whose stream fails leaves no blob, no temporary file and no
/// part, and keeps the blob it was replacing.
pub async fn failed_streams_leave_nothing_behind(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let prefix = run.prefix.clone();
    let before = must(name, "list(before failures)", store.list(&prefix).await);
    let big = Bytes::from(pattern(BIG, 5));

    let too_large_key = key("fail/too-large.bin");
    let limit = 10 * 1024 * 1024;
    let result = store.put_stream(&too_large_key, uneven(&big), limit).await;
    assert!(
        matches!(result, Err(BlobError::TooLarge { limit: l }) if l == limit),
        "[{name}] put_stream of 12 MiB with max_bytes 10 MiB should fail with TooLarge, got {result:?}"
    );
    let result = store
        .put_stream(&too_large_key, chunks_of(&[b"0123456789", b"x"]), 10)
        .await;
    assert!(
        matches!(result, Err(BlobError::TooLarge { limit: 10 })),
        "[{name}] put_stream of 11 bytes with max_bytes 10 should fail with TooLarge, got {result:?}"
    );
    assert_eq!(
        must(name, "size(too large)", store.size(&too_large_key).await),
        None,
        "[{name}] a put_stream over the limit should leave no blob"
    );

    let broken_key = key("fail/broken.bin");
    for sent in [100, 9 * 1024 * 1024] {
        let stream = futures::stream::iter([
            Ok(big.slice(..sent / 2)),
            Ok(big.slice(sent / 2..sent)),
            Err(BlobError::Stream("the client went away".into())),
        ])
        .boxed();
        let result = store.put_stream(&broken_key, stream, BIG as u64).await;
        assert!(
            matches!(result, Err(BlobError::Stream(_))),
            "[{name}] put_stream whose stream fails after {sent} bytes should fail with Stream, got {result:?}"
        );
    }
    assert_eq!(
        must(name, "size(broken)", store.size(&broken_key).await),
        None,
        "[{name}] a put_stream whose stream failed should leave no blob"
    );
    assert_eq!(
        must(name, "list(after failures)", store.list(&prefix).await),
        before,
        "[{name}] failed writes should add nothing to the listing (no temporary files, no parts)"
    );

    // A failed replacement keeps the previous blob whole.
    let kept_key = key("fail/kept.txt");
    must(
        name,
        "put(kept)",
        store.put(&kept_key, Bytes::from_static(b"previous")).await,
    );
    let result = store.put_stream(&kept_key, uneven(&big), 1024).await;
    assert!(
        matches!(result, Err(BlobError::TooLarge { limit: 1024 })),
        "[{name}] an oversized replacement should fail with TooLarge, got {result:?}"
    );
    let stream =
        futures::stream::iter([Ok(big.slice(..6 * 1024 * 1024)), Err(BlobError::Stream("cut".into()))]).boxed();
    let result = store.put_stream(&kept_key, stream, BIG as u64).await;
    assert!(
        matches!(result, Err(BlobError::Stream(_))),
        "[{name}] a broken replacement should fail with Stream, got {result:?}"
    );
    assert_eq!(
        must(name, "get(kept)", store.get(&kept_key).await),
        Bytes::from_static(b"previous"),
        "[{name}] a failed put_stream should keep the previous blob unchanged"
    );
    run.finish().await;
}

/// A rename moves a blob (into a new folder, onto an existing blob, onto itself).
pub async fn renames_move_and_replace(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let (a, b, c) = (key("rename/a.txt"), key("rename/deeper/b.txt"), key("rename/c.txt"));
    must(name, "put(a)", store.put(&a, Bytes::from_static(b"alpha")).await);
    must(name, "rename(a, b)", store.rename(&a, &b).await);
    assert_eq!(
        must(name, "size(a)", store.size(&a).await),
        None,
        "[{name}] the source of a rename should be gone"
    );
    assert!(
        matches!(store.get(&a).await, Err(BlobError::NotFound(_))),
        "[{name}] get() of a renamed source should be NotFound"
    );
    assert_eq!(
        must(name, "get(b)", store.get(&b).await),
        Bytes::from_static(b"alpha"),
        "[{name}] the target of a rename (in a new folder) should hold the content"
    );

    must(
        name,
        "put(c)",
        store.put(&c, Bytes::from_static(b"old target, longer")).await,
    );
    must(name, "rename(b, c)", store.rename(&b, &c).await);
    assert_eq!(
        must(name, "get(c)", store.get(&c).await),
        Bytes::from_static(b"alpha"),
        "[{name}] a rename onto an existing blob should replace it"
    );
    assert_eq!(
        must(name, "size(b)", store.size(&b).await),
        None,
        "[{name}] the source of a replacing rename should be gone"
    );

    must(name, "rename(c, c)", store.rename(&c, &c).await);
    assert_eq!(
        must(name, "get(c after self-rename)", store.get(&c).await),
        Bytes::from_static(b"alpha"),
        "[{name}] renaming a blob to itself should keep it"
    );
    run.finish().await;
}

/// A deleted blob is gone; deleting it again, or a key never written, is not an error.
pub async fn a_deleted_blob_is_gone_and_deletes_repeat(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let doomed = key("delete/doomed.bin");
    must(
        name,
        "put(doomed)",
        store.put(&doomed, Bytes::from_static(b"bye")).await,
    );
    must(name, "delete(doomed)", store.delete(&doomed).await);
    assert_eq!(
        must(name, "size(deleted)", store.size(&doomed).await),
        None,
        "[{name}] a deleted blob should be gone"
    );
    assert!(
        matches!(store.get(&doomed).await, Err(BlobError::NotFound(_))),
        "[{name}] get() of a deleted blob should be NotFound"
    );
    must(name, "delete(doomed) again", store.delete(&doomed).await);
    must(name, "delete(never written)", store.delete(&key("delete/never")).await);
    run.finish().await;
}

/// A listing gives exactly the keys under its prefix, sorted.
pub async fn listings_give_exactly_the_keys_under_a_prefix(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let names = [
        "list/c.txt",
        "list/b/2",
        "list/a",
        "list/ba",
        "list/b/1",
        "list/b/deep/x",
    ];
    for suffix in names {
        must(
            name,
            "put(list)",
            store.put(&key(suffix), Bytes::from(suffix.to_string())).await,
        );
    }
    let keys = |suffixes: &[&str]| suffixes.iter().map(|suffix| key(suffix)).collect::<Vec<_>>();
    let cases: [(&str, Vec<String>); 6] = [
        (
            "list/",
            keys(&[
                "list/a",
                "list/b/1",
                "list/b/2",
                "list/b/deep/x",
                "list/ba",
                "list/c.txt",
            ]),
        ),
        ("list/b", keys(&["list/b/1", "list/b/2", "list/b/deep/x", "list/ba"])),
        ("list/b/", keys(&["list/b/1", "list/b/2", "list/b/deep/x"])),
        ("list/b/deep/x", keys(&["list/b/deep/x"])),
        ("list/zzz", Vec::new()),
        ("nothing-here/", Vec::new()),
    ];
    for (suffix, expected) in cases {
        let prefix = key(suffix);
        let listed = must(name, "list", store.list(&prefix).await);
        assert_eq!(
            listed, expected,
            "[{name}] list({prefix:?}) should give exactly the keys under it, sorted"
        );
    }
    run.finish().await;
}

/// Reading or renaming a missing key is NotFound naming the key; its size is None.
pub async fn missing_keys_are_not_found_by_name(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let missing = key("missing/nothing.bin");
    let expect_not_found = |what: &str, result: Result<(), BlobError>| match result {
        Err(BlobError::NotFound(reported)) => {
            assert_eq!(reported, missing, "[{name}] {what} should name the missing key")
        }
        other => panic!("[{name}] {what} of a missing key should be NotFound, got {other:?}"),
    };
    expect_not_found("get", store.get(&missing).await.map(drop));
    expect_not_found("get_range", store.get_range(&missing, 0, 10).await.map(drop));
    expect_not_found(
        "get_range(empty range)",
        store.get_range(&missing, 5, 5).await.map(drop),
    );
    expect_not_found("get_stream", store.get_stream(&missing, 1024).await.map(drop));
    expect_not_found("rename", store.rename(&missing, &key("missing/target")).await);
    assert_eq!(
        must(name, "size(missing)", store.size(&missing).await),
        None,
        "[{name}] size() of a missing key is None"
    );
    assert_eq!(
        must(name, "size(rename target)", store.size(&key("missing/target")).await),
        None,
        "[{name}] a failed rename should not create its target"
    );
    run.finish().await;
}

/// Every call refuses a key that could escape its folder or is not plain ASCII.
pub async fn invalid_keys_are_refused(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let name = store.name();
    for bad in ["../x", "a/../b", "/abs", "", "a//b", "./a", "a b", "a\\b", "ü", "x/.."] {
        let expect_invalid = |what: &str, result: Result<(), BlobError>| {
            assert!(
                matches!(result, Err(BlobError::InvalidKey(_))),
                "[{name}] {what} with key {bad:?} should be InvalidKey, got {result:?}"
            );
        };
        expect_invalid("put", store.put(bad, Bytes::from_static(b"x")).await);
        let stream = futures::stream::iter([Ok(Bytes::from_static(b"x"))]).boxed();
        expect_invalid("put_stream", store.put_stream(bad, stream, 10).await.map(drop));
        expect_invalid("get", store.get(bad).await.map(drop));
        expect_invalid("get_range", store.get_range(bad, 0, 1).await.map(drop));
        expect_invalid("get_stream", store.get_stream(bad, 1).await.map(drop));
        expect_invalid("size", store.size(bad).await.map(drop));
        expect_invalid("rename(from)", store.rename(bad, "valid/key").await);
        expect_invalid("rename(to)", store.rename("valid/key", bad).await);
        expect_invalid("delete", store.delete(bad).await);
    }
    for bad in ["../", "/", "a//", "a/../", "ü"] {
        let result = store.list(bad).await;
        assert!(
            matches!(result, Err(BlobError::InvalidKey(_))),
            "[{name}] list({bad:?}) should be InvalidKey, got {result:?}"
        );
    }
    run.finish().await;
}

/// Concurrent puts each keep their own content.
pub async fn concurrent_puts_keep_their_own_content(store: &dyn BlobStore) {
    let run = Run::start(store).await;
    let key = |suffix: &str| run.key(suffix);
    let name = store.name();
    let writes = (0..16u64).map(|i| {
        let target = key(&format!("concurrent/{i:02}.bin"));
        let data = Bytes::from(pattern(64 * 1024 + i as usize, i));
        async move {
            let result = store.put(&target, data.clone()).await;
            (target, data, result)
        }
    });
    for (target, data, result) in futures::future::join_all(writes).await {
        must(name, "concurrent put", result);
        assert_bytes(
            name,
            &format!("{target} written concurrently should read back its own content"),
            &must(name, "get(concurrent)", store.get(&target).await),
            &data,
        );
    }
    assert_eq!(
        must(name, "list(concurrent)", store.list(&key("concurrent/")).await).len(),
        16,
        "[{name}] all 16 concurrent puts should be listed"
    );
    run.finish().await;
}

/// Asserts that two contents are equal, describing the first difference instead of dumping
/// megabytes of bytes.
fn assert_bytes(name: &str, what: &str, got: &[u8], expected: &[u8]) {
    if got == expected {
        return;
    }
    let first = got
        .iter()
        .zip(expected)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(expected.len()));
    panic!(
        "[{name}] {what}: got {} bytes, expected {}, first difference at byte {first}",
        got.len(),
        expected.len()
    );
}

/// Unwraps a result or panics naming the store and the call.
fn must<T, E: Debug>(name: &str, call: &str, result: Result<T, E>) -> T {
    result.unwrap_or_else(|err| panic!("[{name}] {call} failed: {err:?}"))
}

/// Reads a whole stream, panicking on an error.
async fn collect(name: &str, mut stream: ByteStream) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    while let Some(chunk) = stream.next().await {
        chunks.push(must(name, "reading a stream chunk", chunk));
    }
    chunks
}

/// Splits content into chunks of uneven sizes (including an empty one) as a stream.
fn uneven(data: &Bytes) -> ByteStream {
    let sizes = [
        1,
        7_777,
        1024 * 1024 + 3,
        0,
        3 * 1024 * 1024 - 1,
        65_536,
        5 * 1024 * 1024 + 11,
    ];
    let mut chunks = Vec::new();
    let mut offset = 0;
    for size in sizes.iter().cycle() {
        if offset >= data.len() {
            break;
        }
        let end = (offset + size).min(data.len());
        chunks.push(Ok(data.slice(offset..end)));
        offset = end;
    }
    futures::stream::iter(chunks).boxed()
}

/// A stream of the given chunks.
fn chunks_of(chunks: &[&[u8]]) -> ByteStream {
    let chunks: Vec<_> = chunks.iter().map(|chunk| Ok(Bytes::copy_from_slice(chunk))).collect();
    futures::stream::iter(chunks).boxed()
}

/// Deterministic bytes that do not repeat with any short period (xorshift), so a misplaced
/// chunk or part cannot go unnoticed.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut data = Vec::with_capacity(len + 8);
    while data.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        data.extend_from_slice(&state.to_le_bytes());
    }
    data.truncate(len);
    data
}
