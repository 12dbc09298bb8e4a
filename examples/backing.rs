//! Prints which backing a pool gets on this machine under each policy, and why it fell back.
//!
//! `cargo run --release --example backing` (reserve hugetlb pages first to see that path:
//! `echo 64 > /proc/sys/vm/nr_hugepages`).

use idxpool::{Backing, BackingPolicy, PoolBuilder};

fn main() {
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
