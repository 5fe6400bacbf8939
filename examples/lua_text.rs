//! Prints the text Redis runs for one of stockd's Lua scripts: its source
//! with the shared helpers of `src/redis/lua/lib/` joined in
//! (`stockd::redis::scripts`). For tools outside the binary that load a
//! script themselves, such as `scripts/bench-instructions.sh`:
//! `cargo run -q --release --example lua_text -- reserve`.

use std::process::ExitCode;

use stockd::redis::scripts;

fn main() -> ExitCode {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: lua_text <script name, e.g. reserve>");
        return ExitCode::from(2);
    };
    match scripts::named(&name) {
        Some(script) => {
            print!("{}", script.text());
            ExitCode::SUCCESS
        }
        None => {
            let names: Vec<&str> = scripts::ALL.iter().map(|s| s.name).collect();
            eprintln!(
                "lua_text: no script named {name:?}; one of: {}",
                names.join(" ")
            );
            ExitCode::from(2)
        }
    }
}
