//! `stockd dlq list|replay|drop`: the operator's hands on the dead-letter
//! queues (see `ops::dlq`). Exit 0 when done, 1 when `drop` was refused or a
//! dead letter could not be moved, 2 when the broker could not be reached.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use crate::cli::{DlqAction, DlqArgs};
use crate::cli_jobs::{EXIT_UNREADABLE, EXIT_VIOLATION};
use crate::domain::SkuId;
use crate::ops::dlq::{self, DeadDeduction, DlqFilter, DlqListing, PoisonLetter, SettleReport};
use crate::resources::Resources;

pub async fn run(res: &Resources, action: &DlqAction) -> ExitCode {
    let (args, verb) = match action {
        DlqAction::List(args) => (args, "list"),
        DlqAction::Replay(args) => (args, "replay"),
        DlqAction::Drop { yes: false, .. } => {
            eprintln!(
                "stockd dlq drop: refused without --yes (dropping loses the deductions; \
                 `stockd dlq list` shows them, `stockd dlq replay` applies them)"
            );
            return ExitCode::from(EXIT_VIOLATION);
        }
        DlqAction::Drop { args, yes: true } => (args, "drop"),
    };
    let filter = match filter_of(args) {
        Ok(filter) => filter,
        Err(err) => {
            eprintln!("stockd dlq: --sku: {err}");
            return ExitCode::from(EXIT_UNREADABLE);
        }
    };
    let tty = std::io::stderr().is_terminal();
    let mut progress = move |read: usize| {
        if tty {
            eprint!("\rdlq {verb}: {read} messages read ");
        }
    };
    let publisher = &res.publisher;
    let outcome = match action {
        DlqAction::List(_) => dlq::list(publisher, filter, &mut progress)
            .await
            .map(|listing| print_listing(&listing, args.json)),
        DlqAction::Replay(_) => dlq::replay(publisher, filter, &mut progress)
            .await
            .map(|report| print_settled(&report, "replayed", args.json)),
        DlqAction::Drop { .. } => dlq::drop_letters(publisher, filter, &mut progress)
            .await
            .map(|report| print_settled(&report, "dropped", args.json)),
    };
    if tty {
        eprintln!();
    }
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(EXIT_VIOLATION),
        Err(err) => {
            eprintln!("stockd dlq {verb}: the broker could not be used: {err}");
            ExitCode::from(EXIT_UNREADABLE)
        }
    }
}

fn filter_of(args: &DlqArgs) -> Result<DlqFilter, crate::domain::ids::IdError> {
    Ok(DlqFilter {
        kind: args.queue,
        sku: args.sku.map(SkuId::new).transpose()?,
        max_messages: args.max,
    })
}

const HEADER: &str = "queue   sku          request_id                        user         count  reason             attempts";

/// One row per deduction; an order's row ends with all its lines (the
/// message names the whole order, whichever line it carries).
fn line(d: &DeadDeduction) -> String {
    let order = d.order_lines.as_ref().map_or(String::new(), |lines| {
        let lines: Vec<String> = lines
            .iter()
            .map(|l| format!("{}x{}", l.sku_id, l.count))
            .collect();
        format!("  order: {}", lines.join(" "))
    });
    format!(
        "{:<7} {:<12} {:<33} {:<12} {:>5}  {:<18} {}{order}",
        d.queue.as_str(),
        d.sku_id,
        d.request_id,
        d.user_id,
        d.count,
        d.reason,
        d.attempts.map_or("-".to_string(), |a| a.to_string())
    )
}

fn poison_line(p: &PoisonLetter) -> String {
    format!(
        "{:<7} POISON (reason {}, message {}): {} — body: {}",
        p.queue.as_str(),
        p.reason,
        p.message_id.as_deref().unwrap_or("without id"),
        p.error,
        p.body_preview
    )
}

/// Prints a listing; always "done" (listing changes nothing).
fn print_listing(listing: &DlqListing, json: bool) -> bool {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(listing).expect("serializes")
        );
        return true;
    }
    println!(
        "{}: {} messages read, {} deductions, {} poison{}",
        listing.queue_name,
        listing.messages_read,
        listing.deductions.len(),
        listing.poison.len(),
        unread_note(listing.messages_unread)
    );
    if !listing.deductions.is_empty() {
        println!("{HEADER}");
    }
    for d in &listing.deductions {
        println!("{}", line(d));
    }
    for p in &listing.poison {
        println!("{}", poison_line(p));
    }
    true
}

/// Prints what a replay or drop did; "done" when no dead letter was left
/// behind by a failed republish.
fn print_settled(report: &SettleReport, verb: &str, json: bool) -> bool {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(report).expect("serializes")
        );
        return report.failed == 0;
    }
    for d in &report.deductions {
        println!("{verb}: {}", line(d));
    }
    for p in &report.poison_dropped {
        println!("{verb}: {}", poison_line(p));
    }
    println!(
        "dlq: {} deductions {verb} from {} messages; {} of other SKUs put back; \
         {} poison left; {} failed (left in the DLQ){}",
        report.deductions.len(),
        report.messages_settled,
        report.returned,
        report.poison_skipped,
        report.failed,
        unread_note(report.messages_unread)
    );
    report.failed == 0
}

fn unread_note(unread: u32) -> String {
    if unread == 0 {
        String::new()
    } else {
        format!(" ({unread} more not read: raise --max or run again)")
    }
}
