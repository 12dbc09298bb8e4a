//! Prints which backing a pool gets on this machine under each policy, and why it fell back.
//!
//! `cargo run --release --example backing` (reserve hugetlb pages first to see that path:
//! `echo 64 > /proc/sys/vm/nr_hugepages`).

use idxpool::{Backing, BackingPolicy, PoolBuilder};

/// `--help`: what the example shows and how long it takes.
const HELP: &str = "\
backing: which memory backing an idxpool pool gets on this machine under each
BackingPolicy (auto, auto-1g, hugetlb-2m, hugetlb-1g, thp, 4k), and why it fell back.
Creates and prefaults one 8 MiB pool per policy: well under a second.

usage: backing [--help]
";

fn main() {
    match std::env::args().nth(1).as_deref() {
        None => {}
        Some("-h" | "--help") => {
            print!("{HELP}");
            return;
        }
        Some(other) => {
            eprint!("backing: unknown argument {other:?}\n\n{HELP}");
            std::process::exit(2);
        }
    }
    println!(
        "free 2 MiB hugepages (sysfs): {}",
        idxpool::region::free_hugepages_2m().map_or("unknown".into(), |n| n.to_string())
    );
    let policies = [
        ("auto", BackingPolicy::Auto),
        ("auto-1g", BackingPolicy::AutoPrefer1G),
        ("hugetlb-2m", BackingPolicy::Require(Backing::Hugetlb2M)),
        ("hugetlb-1g", BackingPolicy::Require(Backing::Hugetlb1G)),
        ("thp", BackingPolicy::Require(Backing::Thp)),
        ("4k", BackingPolicy::Require(Backing::Pages4K)),
    ];
    for (name, policy) in policies {
        // 8 MiB of 2 KiB objects.
        let r = PoolBuilder::<[u8; 2048]>::zeroed(4096)
            .backing(policy)
            .prefault(true)
            .scoped(|pool| pool.backing().to_string());
        match r {
            Ok(report) => println!("{name:>11}: {report}"),
            Err(e) => println!("{name:>11}: error: {e}"),
        }
    }
}
