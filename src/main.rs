//! The `thinkus` binary: `thinkus all` runs every service on embedded defaults; `thinkus
//! <service>` runs one; `thinkus --help` lists the rest.

fn main() -> std::process::ExitCode {
    thinkus_server::main()
}
