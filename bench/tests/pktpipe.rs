//! The pktpipe pipeline (examples/pktpipe/pipeline.rs, included below) run on the shipped
//! captures in tests/data/ must count the packets, bytes and 5-tuple flows that this test
//! computes on its own: the file read with pcap-parser's streaming reader (the pipeline uses
//! the whole-file parsers) and the headers decoded by hand (the pipeline uses etherparse).

#[path = "../examples/pktpipe/pipeline.rs"]
mod pipeline;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::{Duration, Instant};

use idxpool::handle_ring::Zeroing;
use idxpool::{Pool, PoolBuilder};
use pipeline::{load_capture, run_pipeline, Config, FreeMode, Limit, Mbuf, Prefetch, Summary};

const CAPTURES: [&str; 2] = [
    "tests/data/ntp.pcap",
    "tests/data/err-buffertoosmall.pcapng",
];

type Key = (IpAddr, IpAddr, u8, u16, u16);

/// Ethernet frames of a capture, read with pcap-parser's streaming reader.
fn read_frames(path: &str) -> Vec<Vec<u8>> {
    use pcap_parser::pcapng::Block;
    use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
    let file = std::fs::File::open(path).unwrap();
    let mut reader = create_reader(1 << 20, file).unwrap();
    let mut frames = Vec::new();
    let mut legacy_linktype = None;
    let mut if_linktypes = Vec::new();
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => legacy_linktype = Some(h.network),
                    PcapBlockOwned::Legacy(b) => {
                        assert_eq!(legacy_linktype, Some(Linktype::ETHERNET));
                        frames.push(b.data[..b.caplen as usize].to_vec());
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => if_linktypes.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        if_linktypes.push(idb.linktype)
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        assert_eq!(if_linktypes[epb.if_id as usize], Linktype::ETHERNET);
                        frames.push(epb.data[..epb.caplen as usize].to_vec());
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(_)) => panic!("not in our captures"),
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => reader.refill().unwrap(),
            Err(e) => panic!("{path}: {e:?}"),
        }
    }
    frames
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The 5-tuple of a frame, decoded by hand: VLAN tags skipped, IPv4 (ports only for
/// unfragmented TCP/UDP), IPv6 with hop-by-hop / routing / destination-options / fragment
/// extension headers skipped. None for non-IP frames.
fn flow_of(f: &[u8]) -> Option<Key> {
    let mut ethertype = be16(f, 12);
    let mut off = 14;
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        ethertype = be16(f, off + 2);
        off += 4;
    }
    let (src, dst, proto, l4, ports_ok) = match ethertype {
        0x0800 => {
            let ihl = (f[off] & 0x0f) as usize * 4;
            let frag = be16(f, off + 6) & 0x3fff != 0;
            let s: [u8; 4] = f[off + 12..off + 16].try_into().unwrap();
            let d: [u8; 4] = f[off + 16..off + 20].try_into().unwrap();
            (
                IpAddr::V4(Ipv4Addr::from(s)),
                IpAddr::V4(Ipv4Addr::from(d)),
                f[off + 9],
                off + ihl,
                !frag,
            )
        }
        0x86dd => {
            let s: [u8; 16] = f[off + 8..off + 24].try_into().unwrap();
            let d: [u8; 16] = f[off + 24..off + 40].try_into().unwrap();
            let mut next = f[off + 6];
            let mut l4 = off + 40;
            let mut unfragmented = true;
            loop {
                match next {
                    0 | 43 | 60 => {
                        next = f[l4];
                        l4 += (f[l4 + 1] as usize + 1) * 8;
                    }
                    44 => {
                        unfragmented &= be16(f, l4 + 2) & 0xfff9 == 0;
                        next = f[l4];
                        l4 += 8;
                    }
                    _ => break,
                }
            }
            (
                IpAddr::V6(Ipv6Addr::from(s)),
                IpAddr::V6(Ipv6Addr::from(d)),
                next,
                l4,
                unfragmented,
            )
        }
        _ => return None,
    };
    let (sport, dport) = if ports_ok && (proto == 6 || proto == 17) {
        (be16(f, l4), be16(f, l4 + 2))
    } else {
        (0, 0)
    };
    Some((src, dst, proto, sport, dport))
}

struct Expected {
    packets: u64,
    bytes: u64,
    flows: HashMap<Key, (u64, u64)>,
}

fn expected(frames: &[Vec<u8>], loops: u64) -> Expected {
    let mut flows: HashMap<Key, (u64, u64)> = HashMap::new();
    for f in frames {
        if let Some(k) = flow_of(f) {
            let e = flows.entry(k).or_default();
            e.0 += loops;
            e.1 += f.len() as u64 * loops;
        }
    }
    Expected {
        packets: frames.len() as u64 * loops,
        bytes: frames.iter().map(|f| f.len() as u64).sum::<u64>() * loops,
        flows,
    }
}

fn check(s: &Summary, e: &Expected, what: &str) {
    assert_eq!(s.packets, e.packets, "{what}: packets");
    assert_eq!(s.bytes, e.bytes, "{what}: bytes");
    assert_eq!(s.parse_errors, 0, "{what}: parse errors");
    let got: HashMap<Key, (u64, u64)> = s
        .flows
        .iter()
        .map(|(k, f)| {
            (
                (k.src, k.dst, k.proto, k.sport, k.dport),
                (f.packets, f.bytes),
            )
        })
        .collect();
    assert_eq!(got.len(), e.flows.len(), "{what}: distinct flows");
    assert_eq!(got, e.flows, "{what}: per-flow counts");
}

/// The worker's and RX's per-thread caches go back to the ring when the threads exit (TLS
/// destructors, which may finish just after the join).
fn assert_all_home<B: idxpool::Brand, R: idxpool::repr::Repr>(pool: &Pool<Mbuf, B, R>) {
    let t = Instant::now();
    while pool.in_use() != 0 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(pool.in_use(), 0);
}

fn configs() -> Vec<Config> {
    let mut v = Vec::new();
    for free in [FreeMode::PerPacket, FreeMode::Bulk] {
        for zeroing in [Zeroing::Batched, Zeroing::Immediate] {
            v.push(Config {
                free,
                prefetch: match (free, zeroing) {
                    (FreeMode::Bulk, Zeroing::Batched) => Prefetch::Burst,
                    (FreeMode::Bulk, _) => Prefetch::Next,
                    _ => Prefetch::Off,
                },
                zeroing,
                ring_size: 64,
                pin: None,
                parse: true,
            });
        }
    }
    // A tiny ring: the RX thread keeps finding it full.
    v.push(Config {
        ring_size: 2,
        ..Config::default()
    });
    v
}

fn builder() -> PoolBuilder<'static, Mbuf> {
    PoolBuilder::<Mbuf>::with_init(512, |_, s| s.write(Mbuf::empty())).cache_size(32)
}

#[test]
fn shipped_captures_count_as_computed_independently() {
    for path in CAPTURES {
        let frames = read_frames(path);
        assert!(!frames.is_empty(), "{path}");
        let cap = load_capture(Path::new(path)).unwrap();
        assert_eq!(cap.skipped_linktype, 0);
        assert_eq!(cap.truncated, 0);
        let loaded: Vec<&[u8]> = cap.frames.iter().map(|f| f.data.as_slice()).collect();
        let read: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        assert_eq!(
            loaded, read,
            "{path}: the example's loader reads the same frames"
        );
        for loops in [1, 3] {
            let e = expected(&frames, loops);
            builder()
                .scoped(|pool| {
                    for cfg in configs() {
                        let s = run_pipeline(&pool, &cap.frames, &cfg, Limit::Loops(loops));
                        check(&s, &e, &format!("{path} x{loops} index {cfg:?}"));
                    }
                    assert_all_home(&pool);
                })
                .unwrap();
            builder()
                .repr::<idxpool::Pointer>()
                .scoped(|pool| {
                    let cfg = Config::default();
                    let s = run_pipeline(&pool, &cap.frames, &cfg, Limit::Loops(loops));
                    check(&s, &e, &format!("{path} x{loops} pointer"));
                    assert_all_home(&pool);
                })
                .unwrap();
        }
    }
}

#[test]
fn captures_hold_what_the_readme_says() {
    // tests/data/README.md documents these numbers.
    let ntp = expected(&read_frames(CAPTURES[0]), 1);
    assert_eq!((ntp.packets, ntp.bytes, ntp.flows.len()), (12, 1080, 12));
    let tcp = expected(&read_frames(CAPTURES[1]), 1);
    assert_eq!((tcp.packets, tcp.bytes, tcp.flows.len()), (27, 8687, 2));
}

#[test]
fn synthetic_frames_have_their_size_and_parse() {
    for &size in pipeline::STANDARD_SIZES.iter().chain(&[576, 1500]) {
        let frames = pipeline::synthetic_frames(&[size], 16);
        assert_eq!(frames.len(), 16);
        for f in &frames {
            assert_eq!(f.data.len(), size - pipeline::FCS);
            let p = pipeline::parse(&f.data).unwrap();
            let k = p.key.unwrap();
            assert_eq!(
                Some((k.src, k.dst, k.proto, k.sport, k.dport)),
                flow_of(&f.data),
                "size {size}"
            );
        }
    }
    // IMIX: 7:4:1 and every flow kind present at the larger sizes.
    let frames = pipeline::synthetic_frames(&pipeline::IMIX, 64);
    let n = |s: usize| frames.iter().filter(|f| f.data.len() + 4 == s).count();
    assert_eq!(
        (n(64) / 7, n(576) / 4, n(1500)),
        (n(1500), n(1500), n(1500))
    );
    let raw: Vec<Vec<u8>> = frames.iter().map(|f| f.data.clone()).collect();
    let e = expected(&raw, 2);
    builder()
        .scoped(|pool| {
            let s = run_pipeline(&pool, &frames, &Config::default(), Limit::Loops(2));
            check(&s, &e, "imix");
            assert!(s.vlan > 0 && s.ipv6 > 0 && s.tcp > 0 && s.udp > 0);
            assert_all_home(&pool);
        })
        .unwrap();
}
