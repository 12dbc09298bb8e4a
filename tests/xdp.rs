//! AF_XDP with the pool's region as the UMEM (feature `xdp`), on a real veth pair in a network
//! namespace. Each test that needs the kernel skips, saying why, where AF_XDP cannot run (not
//! root, no veth, the kernel refusing XDP).
#![cfg(all(feature = "xdp", target_os = "linux"))]

#[path = "support/veth_lab.rs"]
mod veth_lab;

use std::sync::Arc;
use std::time::{Duration, Instant};

use idxpool::xdp::{Frame, LentTo, XdpConfig, XdpSocket};
use idxpool::{Pool, PoolBuilder, StrideMode};
use veth_lab::{frame, seq_of, Lab, PacketSock};

type P = Pool<[u8; 2048]>;

fn pool(n: u32) -> Arc<P> {
    Arc::new(
        PoolBuilder::<[u8; 2048]>::zeroed(n)
            .stride(StrideMode::Natural)
            .build()
            .unwrap(),
    )
}

/// A lab, or the reason to skip.
fn lab(tag: &str) -> Option<Lab> {
    if let Err(why) = idxpool::xdp::available() {
        println!("skipped: {why}");
        return None;
    }
    match Lab::up(tag) {
        Ok(l) => Some(l),
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

/// Sends `n` 64-byte frames numbered from `first` from the namespace end of `lab`.
fn send(lab: &Lab, first: u64, n: u64) {
    let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
    lab.in_ns(move || {
        let s = PacketSock::new(&b, 0).unwrap();
        for seq in first..first + n {
            let f = frame(dst, src, seq, 64);
            while s.send_many(&[&f]) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .join()
    .unwrap()
    .unwrap();
}

/// Polls until `want` frames arrived or `limit` passed.
fn recv(xsk: &mut XdpSocket<Arc<P>>, want: usize, limit: Duration) -> Vec<Frame<[u8; 2048]>> {
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < want && t0.elapsed() < limit {
        xsk.poll(&mut got, Some(Duration::from_millis(20))).unwrap();
    }
    got
}

#[test]
fn received_frames_are_handles_of_the_pool() {
    let Some(lab) = lab("xtrx") else { return };
    let pool = pool(256);
    let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    xsk.refill();
    assert_eq!(pool.lent_to_kernel(), 64, "one burst lent");
    send(&lab, 0, 50);
    let got = recv(&mut xsk, 50, Duration::from_secs(5));
    assert_eq!(got.len(), 50, "stats {:?}", xsk.stats());
    for (k, f) in got.iter().enumerate() {
        let b = xsk.bytes(f);
        assert_eq!(b.len(), 64);
        assert_eq!(seq_of(b), Some(k as u64));
        assert_eq!(&b[0..6], &lab.mac_a);
    }
    let s = xsk.stats();
    assert_eq!(s.rx_packets, 50);
    assert_eq!(s.bad_descriptors, 0);
    assert!(s.fill_bursts <= s.frames_filled.div_ceil(1));
    for f in got {
        pool.put(f.handle);
    }
    assert_eq!(
        pool.lent_to_kernel(),
        xsk.lent(LentTo::Fill) as usize,
        "the count is the ledger's"
    );
    let r = xsk.audit();
    assert!(r.is_err(), "the test holds a clone of the Arc");
    drop(xsk);
    assert_eq!(pool.lent_to_kernel(), 0);
    assert!(pool.is_full());
}
