//! BENCHMARKS.md's report is generated (issue 53, item 4): its block between
//! the markers must be what `stockd-bench report` renders from the committed
//! run (docs/bench/last-run.json and last-instructions.json). A hand edit of
//! the table, or a run committed without the table it made, fails here.

use stockd_bench::page;

use super::{read, root};

/// The block on the page equals the block re-rendered from the kept JSON.
#[test]
fn the_benchmarks_report_is_the_render_of_the_committed_run() {
    let page_text = read("BENCHMARKS.md");
    let on_page = page::block(&page_text).unwrap_or_else(|| {
        panic!(
            "BENCHMARKS.md: no generated block between\n{}\n{}",
            page::BEGIN,
            page::END
        )
    });
    let rendered = page::render_kept(&root()).unwrap();
    if on_page != rendered {
        let first = on_page
            .lines()
            .zip(rendered.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map_or_else(
                || "the blocks differ in length".to_string(),
                |(i, (a, b))| format!("block line {}:\n  page:     {a}\n  rendered: {b}", i + 1),
            );
        panic!(
            "BENCHMARKS.md's report differs from the render of {} (edited by hand? \
             run `stockd-bench report` after `make bench`, or `make bench`):\n{first}",
            page::RUN_JSON
        );
    }
}
