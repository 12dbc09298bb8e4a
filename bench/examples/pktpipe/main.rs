//! pktpipe: an l2fwd-like packet pipeline over an idxpool mbuf pool and a handle ring, to
//! measure bulk free (memnic / `rte_pktmbuf_free_bulk`), prefetch ahead (ixgbe TX), batched
//! slot zeroing (Linux ptr_ring) and index vs pointer entries in a realistic setting.
//!
//! An RX thread allocates mbufs (64-byte metadata + 2048-byte data room, one pool object each)
//! in bursts of 32, copies frames into them and passes the handles through a
//! [`idxpool::HandleRing`] to a worker thread, which parses Ethernet / VLAN / IPv4 / IPv6 /
//! UDP / TCP (etherparse), swaps the MACs, counts packets, bytes and 5-tuple flows, and frees
//! the burst ("TX"). See `pipeline.rs`.
//!
//! Each table row measures two variants side by side (`--compare`: which switch differs; the
//! other switches apply to both), interleaved, `--reps` times `--duration-ms`, median.
//!
//! ```sh
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick                       # bulk vs per-packet free
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --compare prefetch
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --compare prefetch --prefetch burst
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --compare ring --ring-size 256
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --compare pool        # index vs pointer
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --compare aa          # A/A noise floor
//! cargo run --release -p idxpool-bench --example pktpipe -- --pcap bench/tests/data/err-buffertoosmall.pcapng --loops 100
//! cargo run --release -p idxpool-bench --example pktpipe -- --imix --free per-packet --compare none
//! cargo run --release -p idxpool-bench --example pktpipe -- --quick --work l2fwd           # MAC swap only
//! ```
//!
//! `--pool pointer` runs the same pipeline on the pointer twin (`idxpool::ptr::Pool`, 8-byte
//! entries in caches and common ring) with `HandleRing` (the same ptr_ring algorithm with
//! 8-byte slots and batches of 16 instead of 32): only the entry width differs.

mod pipeline;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use idxpool::handle_ring::Zeroing;
use idxpool::PoolBuilder;
use idxpool_bench::pin::{context_line, PinMode, Pinning};
use idxpool_bench::stats::median;
use pipeline::{
    load_capture, run_pipeline, synthetic_frames, Config, Frame, FreeMode, Limit, Mbuf, Prefetch,
    Summary, IMIX, STANDARD_SIZES,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum FreeArg {
    PerPacket,
    Bulk,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PrefetchArg {
    /// no prefetch
    Off,
    /// the worker prefetches the next mbuf one packet ahead (ixgbe TX); `on` is an alias
    #[value(alias = "on")]
    Next,
    /// VPP's pattern: prefetch the whole burst (pool.prefetch_all) after RX's get_bulk and
    /// after the worker's consume_burst, before writing / parsing it
    Burst,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum WorkArg {
    /// parse headers with etherparse, count flows, swap MACs
    Parse,
    /// only swap MACs and count packets and bytes (DPDK l2fwd)
    L2fwd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RingArg {
    Batch,
    Nobatch,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum PoolArg {
    Index,
    Pointer,
    /// A second index pool (for the A/A comparison).
    #[value(skip)]
    Index2,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Compare {
    /// per-packet (A) vs bulk (B) free
    Free,
    /// prefetch off (A) vs the --prefetch mode (B; `next` when --prefetch is off), e.g.
    /// `--compare prefetch --prefetch burst`
    Prefetch,
    /// ring without (A) vs with (B) batched zeroing
    Ring,
    /// pointer (A) vs index (B) pool and ring
    Pool,
    /// A/A: the configured variant against itself on a second index pool (the method's
    /// noise floor, including any bias from where a pool lands in memory)
    Aa,
    /// only the configured variant
    None,
}

/// l2fwd-like packet pipeline over an idxpool mbuf pool and a handle ring.
///
/// Measures packets per second (Mpps) and Gbit/s through an RX thread (allocates mbufs in
/// bursts of 32, copies frames in, passes handles through a HandleRing) and a worker thread
/// (parses headers, counts flows, swaps MACs, frees the burst), for two variants side by side
/// (--compare: free mode, prefetch, ring zeroing, index vs pointer pool, or A/A), interleaved,
/// median of --reps. Synthetic frames of 7 sizes + IMIX, or a capture (--pcap).
/// Takes about 10 s with --quick (8 rows x 2 variants x 3 reps x 100 ms), about 25 s by
/// default (5 reps x 250 ms); --pcap replays one row. Threads are not pinned unless --pin.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// Replay a pcap or pcapng capture (Ethernet) instead of synthetic traffic.
    #[arg(long)]
    pcap: Option<PathBuf>,
    /// Replays of the capture for the flow summary.
    #[arg(long, default_value_t = 1)]
    loops: u64,
    /// Synthetic frame sizes in bytes, FCS included (default: 64,128,256,512,1024,1280,1518
    /// and IMIX).
    #[arg(long, value_delimiter = ',')]
    sizes: Option<Vec<usize>>,
    /// Add the IMIX row (64/576/1500 at 7:4:1); alone, only IMIX.
    #[arg(long)]
    imix: bool,
    /// TX free mode.
    #[arg(long, value_enum, default_value = "bulk")]
    free: FreeArg,
    /// Prefetch mbufs: off, next (one packet ahead in the worker; `on` is an alias) or burst
    /// (VPP: the whole burst at once on RX and worker, then process it).
    #[arg(long, value_enum, default_value = "off")]
    prefetch: PrefetchArg,
    /// Ring slot zeroing: batched (ptr_ring) or immediate.
    #[arg(long, value_enum, default_value = "batch")]
    ring: RingArg,
    /// Pool (and ring) entries: 4-byte indices or 8-byte pointers.
    #[arg(long, value_enum, default_value = "index")]
    pool: PoolArg,
    /// Which switch the two columns of the table differ in.
    #[arg(long, value_enum, default_value = "free")]
    compare: Compare,
    /// Short run (about 10 s): 100 ms per measurement, 3 repetitions.
    #[arg(long)]
    quick: bool,
    /// Milliseconds per measurement (default 250; 100 with --quick).
    #[arg(long)]
    duration_ms: Option<u64>,
    /// Repetitions per variant and row, interleaved; the median is shown (default 5; 3 with
    /// --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Handle ring slots.
    #[arg(long, default_value_t = 1024)]
    ring_size: usize,
    /// Synthetic flows.
    #[arg(long, default_value_t = 64)]
    flows: usize,
    /// Mbufs per pool.
    #[arg(long, default_value_t = 8192)]
    mbufs: u32,
    /// Per-thread cache size of the pools.
    #[arg(long, default_value_t = 256)]
    cache: u32,
    /// Worker's per-packet work.
    #[arg(long, value_enum, default_value = "parse")]
    work: WorkArg,
    /// Pin the RX thread to the first allowed CPU and the worker to the second: off (default),
    /// on, or auto (only when both CPUs are idle now). On a shared machine pinned threads wait
    /// for their busy CPU: 100-500x slower was measured there.
    #[arg(long, value_enum, default_value_t = PinMode::Off)]
    pin: PinMode,
    /// Print every measurement.
    #[arg(long)]
    verbose: bool,
}

#[derive(Clone, Copy, Debug)]
struct Variant {
    cfg: Config,
    pool: PoolArg,
}

impl Variant {
    fn label(&self, what: Compare) -> String {
        match what {
            Compare::Free | Compare::None => match self.cfg.free {
                FreeMode::PerPacket => "per-packet".into(),
                FreeMode::Bulk => "bulk".into(),
            },
            Compare::Prefetch => match self.cfg.prefetch {
                Prefetch::Off => "no prefetch".into(),
                Prefetch::Next => "prefetch".into(),
                Prefetch::Burst => "pf burst".into(),
            },
            Compare::Ring => self.cfg.zeroing.name(),
            Compare::Pool => format!("{:?}", self.pool).to_lowercase(),
            Compare::Aa => match self.pool {
                PoolArg::Index2 => "pool 2".into(),
                _ => "pool 1".into(),
            },
        }
    }
}

fn print_summary(s: &Summary) {
    println!(
        "packets {}  bytes {}  distinct flows {}  (ipv4 {}, ipv6 {}, vlan {}, tcp {}, udp {}, \
         other l4 {}, non-ip {}, parse errors {})",
        s.packets,
        s.bytes,
        s.flows.len(),
        s.ipv4,
        s.ipv6,
        s.vlan,
        s.tcp,
        s.udp,
        s.other_l4,
        s.non_ip,
        s.parse_errors
    );
    println!("top 5 flows:");
    for (i, (k, f)) in s.top_flows(5).iter().enumerate() {
        println!(
            "  {}. {k:<60} packets {:>8}  bytes {:>10}",
            i + 1,
            f.packets,
            f.bytes
        );
    }
}

fn main() {
    let args = Args::parse();
    let duration =
        Duration::from_millis(
            args.duration_ms
                .unwrap_or(if args.quick { 100 } else { 250 }),
        );
    let reps = args.reps.unwrap_or(if args.quick { 3 } else { 5 }).max(1);
    let pinning = Pinning::decide(args.pin, 2);
    println!("pktpipe: {}", context_line(&pinning));
    let base = Variant {
        cfg: Config {
            free: match args.free {
                FreeArg::PerPacket => FreeMode::PerPacket,
                FreeArg::Bulk => FreeMode::Bulk,
            },
            prefetch: match args.prefetch {
                PrefetchArg::Off => Prefetch::Off,
                PrefetchArg::Next => Prefetch::Next,
                PrefetchArg::Burst => Prefetch::Burst,
            },
            zeroing: match args.ring {
                RingArg::Batch => Zeroing::Batched,
                RingArg::Nobatch => Zeroing::Immediate,
            },
            ring_size: args.ring_size,
            pin: match (pinning.cpu_for(0), pinning.cpu_for(1)) {
                (Some(a), Some(b)) => Some([a, b]),
                _ => None,
            },
            parse: args.work == WorkArg::Parse,
        },
        pool: args.pool,
    };
    let (a, b) = {
        let (mut a, mut b) = (base, base);
        match args.compare {
            Compare::Free => {
                a.cfg.free = FreeMode::PerPacket;
                b.cfg.free = FreeMode::Bulk;
            }
            Compare::Prefetch => {
                a.cfg.prefetch = Prefetch::Off;
                if b.cfg.prefetch == Prefetch::Off {
                    b.cfg.prefetch = Prefetch::Next;
                }
            }
            Compare::Ring => {
                a.cfg.zeroing = Zeroing::Immediate;
                b.cfg.zeroing = Zeroing::Batched;
            }
            Compare::Pool => {
                a.pool = PoolArg::Pointer;
                b.pool = PoolArg::Index;
            }
            Compare::Aa => {
                a.pool = PoolArg::Index;
                b.pool = PoolArg::Index2;
            }
            Compare::None => {}
        }
        (a, b)
    };
    let variants: Vec<Variant> = if args.compare == Compare::None {
        vec![base]
    } else {
        vec![a, b]
    };

    // Rows: (label, average wire size, frames).
    let mut rows: Vec<(String, Vec<Frame>)> = Vec::new();
    let mut capture = None;
    if let Some(path) = &args.pcap {
        let cap = load_capture(path).unwrap_or_else(|e| {
            eprintln!("pktpipe: {e}");
            std::process::exit(1);
        });
        if cap.frames.is_empty() {
            eprintln!("pktpipe: no Ethernet frames in {}", path.display());
            std::process::exit(1);
        }
        println!(
            "capture {}: {} Ethernet frames ({} skipped: not Ethernet, {} truncated to the data room)",
            path.display(),
            cap.frames.len(),
            cap.skipped_linktype,
            cap.truncated
        );
        rows.push(("pcap".into(), cap.frames.clone()));
        capture = Some(cap);
    } else {
        let sizes = match (&args.sizes, args.imix) {
            (Some(s), _) => s.clone(),
            (None, true) => Vec::new(),
            (None, false) => STANDARD_SIZES.to_vec(),
        };
        for s in sizes {
            if !(64..=DATA_ROOM_WIRE).contains(&s) {
                eprintln!("pktpipe: frame size {s} outside 64..={DATA_ROOM_WIRE}");
                std::process::exit(2);
            }
            rows.push((format!("{s}"), synthetic_frames(&[s], args.flows)));
        }
        if args.imix || args.sizes.is_none() {
            rows.push(("IMIX".into(), synthetic_frames(&IMIX, args.flows)));
        }
    }

    let builder = || {
        PoolBuilder::<Mbuf>::with_init(args.mbufs, |_, slot| slot.write(Mbuf::empty()))
            .cache_size(args.cache)
            .name("mbufs")
    };
    let res = builder().scoped(|ipool| {
        builder().scoped(|ipool2| {
        builder()
            .repr::<idxpool::Pointer>().scoped(|ppool| {
                println!(
                    "pools: {} mbufs x {} B stride, cache {}, backing {} (index) / {} (pointer) \
                     | ring {} slots (batch {} index / {} pointer when batched) | burst {}",
                    ipool.capacity(),
                    ipool.stride(),
                    ipool.cache_size(),
                    ipool.backing(),
                    ppool.backing(),
                    args.ring_size,
                    idxpool::HandleRing::new(&ipool, args.ring_size, Zeroing::Batched)
                        .map(|(p, _)| p.ring().batch())
                        .unwrap_or(0),
                    idxpool::handle_ring::HandleRing::new(
                        &ppool,
                        args.ring_size,
                        Zeroing::Batched
                    )
                    .map(|(p, _)| p.ring().batch())
                    .unwrap_or(0),
                    pipeline::BURST,
                );
                let run = |v: &Variant, frames: &[Frame], limit: Limit| -> Summary {
                    match v.pool {
                        PoolArg::Index => run_pipeline(&ipool, frames, &v.cfg, limit),
                        PoolArg::Index2 => run_pipeline(&ipool2, frames, &v.cfg, limit),
                        PoolArg::Pointer => run_pipeline(&ppool, frames, &v.cfg, limit),
                    }
                };

                if let Some(cap) = &capture {
                    let s = run(&base, &cap.frames, Limit::Loops(args.loops.max(1)));
                    println!(
                        "flow summary ({} loop(s), {:?}): {:.2} Mpps, {:.2} Gbit/s",
                        args.loops.max(1),
                        base,
                        s.mpps(),
                        s.gbps()
                    );
                    print_summary(&s);
                    println!();
                }

                // Warm-up: page-fault the pools, spin up the caches.
                for v in &variants {
                    run(v, &rows[0].1, Limit::Duration(Duration::from_millis(50)));
                }
                println!(
                    "{} reps x {} ms per cell, interleaved, median; other switches: work {:?}, \
                     free {:?}, prefetch {}, ring {}, pool {:?}",
                    reps,
                    duration.as_millis(),
                    args.work,
                    base.cfg.free,
                    base.cfg.prefetch.name(),
                    base.cfg.zeroing.name(),
                    base.pool
                );
                let lab: Vec<String> = variants.iter().map(|v| v.label(args.compare)).collect();
                if variants.len() == 2 {
                    println!(
                        "{:>10} | {:>14} | {:>14} | {:>7} | {:>10} | {:>10} | rx waits A/B",
                        "frame B",
                        format!("{} Mpps", lab[0]),
                        format!("{} Mpps", lab[1]),
                        "B vs A",
                        "Gbit/s A",
                        "Gbit/s B"
                    );
                } else {
                    println!(
                        "{:>10} | {:>14} | {:>10} | rx waits | worker idle",
                        "frame B",
                        format!("{} Mpps", lab[0]),
                        "Gbit/s"
                    );
                }
                for (label, frames) in &rows {
                    let mut mpps = vec![Vec::new(); variants.len()];
                    let mut gbps = vec![Vec::new(); variants.len()];
                    let mut waits = vec![0u64; variants.len()];
                    let mut idle = vec![0u64; variants.len()];
                    for r in 0..reps {
                        for k in 0..variants.len() {
                            // Alternate the order: A B, B A, ...
                            let k = if r % 2 == 0 { k } else { variants.len() - 1 - k };
                            let s = run(&variants[k], frames, Limit::Duration(duration));
                            if args.verbose {
                                println!(
                                    "  {label} {}: {:.3} Mpps {:.3} Gbit/s ({} pkts, rx waits: ring \
                                     full {} pool empty {}, worker idle {})",
                                    lab[k],
                                    s.mpps(),
                                    s.gbps(),
                                    s.packets,
                                    s.rx_waits,
                                    s.rx_pool_empty,
                                    s.worker_idle
                                );
                            }
                            mpps[k].push(s.mpps());
                            gbps[k].push(s.gbps());
                            waits[k] += s.rx_waits;
                            idle[k] += s.worker_idle;
                        }
                    }
                    let m: Vec<f64> = mpps.iter().map(|v| median(v)).collect();
                    let g: Vec<f64> = gbps.iter().map(|v| median(v)).collect();
                    if variants.len() == 2 {
                        println!(
                            "{:>10} | {:>14.3} | {:>14.3} | {:>+6.1}% | {:>10.2} | {:>10.2} | {}/{}",
                            label,
                            m[0],
                            m[1],
                            (m[1] / m[0] - 1.0) * 100.0,
                            g[0],
                            g[1],
                            waits[0] / reps as u64,
                            waits[1] / reps as u64
                        );
                    } else {
                        println!(
                            "{:>10} | {:>14.3} | {:>10.2} | {:>8} | {}",
                            label,
                            m[0],
                            g[0],
                            waits[0] / reps as u64,
                            idle[0] / reps as u64
                        );
                    }
                }
            })
            .expect("pointer pool")
        })
        .expect("second index pool")
    });
    if let Err(e) = res {
        eprintln!("pktpipe: {e}");
        std::process::exit(1);
    }
}

/// Largest synthetic frame on the wire: the data room plus the FCS.
const DATA_ROOM_WIRE: usize = pipeline::DATA_ROOM + pipeline::FCS;
