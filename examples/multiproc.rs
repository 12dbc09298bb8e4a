//! One pool, many processes: a primary and N secondaries exchange handles through a shared
//! region (issue 7).
//!
//! ```text
//! cargo run --release --example multiproc -- [--quick] [--kill] [--procs N] [--items M]
//! ```
//!
//! The primary creates the pool (hugetlbfs if mounted, else /dev/shm) and runs N copies of this
//! binary with `--secondary`. Each secondary attaches by name (at whatever address its kernel
//! picks), takes WORK messages from channel 0, checks the primary's stamp, restamps the same
//! object as a REPLY with its pid and sends it back on channel 1; every 4th message it also
//! takes a fresh object from the pool and sends it as NEW. The primary verifies every object it
//! receives (checksum, sender pid, no sequence number twice) and puts it back.
//!
//! With `--kill` the primary sends SIGKILL to one secondary halfway through, then shows the
//! recovery: `reclaim_dead` (its slot and cached objects) and `reclaim_in_use_of_dead` (the
//! objects it held), both while the other secondaries keep running; at the end an audit
//! proves every object is accounted for. A process killed *inside* a ring operation wedges
//! that ring (the one unrecoverable case, see DESIGN.md): a watchdog then reports it and exits
//! with status 2 instead of hanging.

use std::process::{Child, Command, ExitCode};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use idxpool::shared::{fingerprint, SharedHandle, SharedOptions, SharedPool};

const WORK: u32 = 1;
const REPLY: u32 = 2;
const NEW: u32 = 3;
const STOP: u32 = 4;
const TO_SECONDARIES: u32 = 0;
const TO_PRIMARY: u32 = 1;

/// One 64-byte message object.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct Msg {
    kind: u32,
    pid: u32,
    seq: u64,
    payload: [u64; 5],
    check: u64,
}

fn fp() -> u64 {
    fingerprint("examples/multiproc Msg v1")
}

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x
}

fn checksum(m: &Msg) -> u64 {
    let mut h = mix(((m.kind as u64) << 32) | m.pid as u64) ^ mix(m.seq);
    for p in m.payload {
        h = mix(h ^ p);
    }
    h
}

fn stamp(m: &mut Msg, kind: u32, pid: u32, seq: u64) {
    m.kind = kind;
    m.pid = pid;
    m.seq = seq;
    for (i, p) in m.payload.iter_mut().enumerate() {
        *p = mix(seq.wrapping_mul(31).wrapping_add(i as u64) ^ pid as u64);
    }
    m.check = checksum(m);
}

fn valid(m: &Msg) -> bool {
    m.check == checksum(m)
        && m.payload
            .iter()
            .enumerate()
            .all(|(i, &p)| p == mix(m.seq.wrapping_mul(31).wrapping_add(i as u64) ^ m.pid as u64))
}

struct Args {
    secondary: Option<(String, u32)>,
    procs: u32,
    items: u64,
    kill: bool,
    quick: bool,
}

fn parse_args() -> Args {
    let mut a = Args {
        secondary: None,
        procs: 4,
        items: 400_000,
        kill: false,
        quick: false,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        match v[i].as_str() {
            "--secondary" => {
                a.secondary = Some((v[i + 1].clone(), v[i + 2].parse().expect("index")));
                i += 2;
            }
            "--procs" => {
                a.procs = v[i + 1].parse().expect("--procs N");
                i += 1;
            }
            "--items" => {
                a.items = v[i + 1].parse().expect("--items M");
                i += 1;
            }
            "--kill" => a.kill = true,
            "--quick" => a.quick = true,
            "-h" | "--help" => {
                println!("usage: multiproc [--quick] [--kill] [--procs N] [--items M]");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    if a.quick {
        a.items = a.items.min(100_000);
        a.procs = a.procs.min(3);
    }
    a
}

fn main() -> ExitCode {
    let args = parse_args();
    match &args.secondary {
        Some((name, idx)) => secondary(name, *idx),
        None => primary(&args),
    }
}

/// A little per-message work, so that processes spend most of their time outside ring
/// operations (as real consumers do).
fn work(m: &Msg) -> u64 {
    let mut h = m.check;
    for _ in 0..10_000 {
        h = mix(h);
    }
    h
}

fn secondary(name: &str, idx: u32) -> ExitCode {
    let pool = match SharedPool::<Msg>::attach(name, fp()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("secondary {idx}: attach failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let me = std::process::id();
    println!(
        "  secondary {idx}: pid {me}, slot {}, region mapped at {:p}",
        pool.slot(),
        pool.base()
    );
    let primary_pid = pool.creator().pid;
    let (mut received, mut bad, mut replies, mut news) = (0u64, 0u64, 0u64, 0u64);
    let mut batch: Vec<SharedHandle<Msg>> = Vec::with_capacity(16);
    let mut out: Vec<SharedHandle<Msg>> = Vec::with_capacity(32);
    let mut sink = 0u64;
    let mut idle_since = Instant::now();
    let mut stop = false;
    while !stop {
        if pool.recv_burst(TO_SECONDARIES, &mut batch, 16) == 0 {
            if idle_since.elapsed() > Duration::from_secs(20) {
                eprintln!("secondary {idx}: nothing for 20 s, giving up");
                return ExitCode::FAILURE;
            }
            std::thread::yield_now();
            continue;
        }
        idle_since = Instant::now();
        for mut h in batch.drain(..) {
            let m = *pool.get_ref(&h);
            if stop || m.kind == STOP {
                if stop {
                    // A STOP meant for another secondary: pass it on.
                    pool.send(TO_SECONDARIES, h);
                } else {
                    stop = true;
                    pool.put(h);
                }
                continue;
            }
            received += 1;
            if m.kind != WORK || m.pid != primary_pid || !valid(&m) {
                bad += 1;
            }
            sink ^= work(&m);
            stamp(pool.get_mut(&mut h), REPLY, me, m.seq);
            out.push(h);
            replies += 1;
            if m.seq % 4 == 0 {
                if let Ok(mut n) = pool.get() {
                    stamp(pool.get_mut(&mut n), NEW, me, news);
                    news += 1;
                    out.push(n);
                }
            }
        }
        pool.send_bulk(TO_PRIMARY, &mut out);
    }
    println!(
        "  secondary {idx}: pid {me}: received {received} work (bad {bad}), sent {replies} \
         replies + {news} new [{:x}]",
        sink & 0xf
    );
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

struct Secondaries {
    children: Vec<(u32, Child, bool)>,
}

impl Secondaries {
    fn kill_all(&mut self) {
        for (_, c, done) in self.children.iter_mut() {
            if !*done {
                let _ = c.kill();
                let _ = c.wait();
                *done = true;
            }
        }
    }
}

impl Drop for Secondaries {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn primary(args: &Args) -> ExitCode {
    let name = format!("idxpool-multiproc-{}", std::process::id());
    let capacity = 4096;
    let opts = SharedOptions::new()
        .cache_size(32)
        .channels(2)
        .max_processes(args.procs + 2);
    let pool = match SharedPool::<Msg>::create(&name, capacity, fp(), opts) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("create failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "primary: pid {}, pool {:?}: {} x {} B objects (stride {}), {} backing (page {} KiB, \
         {} bytes mapped at {:p}), cache {} per process, {} secondaries, {} work items",
        std::process::id(),
        pool.path(),
        capacity,
        std::mem::size_of::<Msg>(),
        pool.stride(),
        pool.backing(),
        pool.page_size() >> 10,
        pool.mapped_len(),
        pool.base(),
        pool.cache_size(),
        args.procs,
        args.items
    );
    let exe = std::env::current_exe().expect("current_exe");
    let mut kids = Secondaries {
        children: Vec::new(),
    };
    for i in 0..args.procs {
        let c = Command::new(&exe)
            .args(["--secondary", &name, &i.to_string()])
            .spawn()
            .expect("spawn secondary");
        kids.children.push((c.id(), c, false));
    }

    // Start when every secondary has attached.
    let t0 = Instant::now();
    while pool.processes().len() < args.procs as usize + 1 {
        if t0.elapsed() > Duration::from_secs(10) {
            eprintln!("secondaries did not attach within 10 s");
            return ExitCode::FAILURE;
        }
        std::thread::sleep(Duration::from_millis(1));
    }

    // Watchdog: a wedged ring (a process killed inside a ring operation) would hang everyone.
    let progress = Arc::new(AtomicU64::new(0));
    let finished = Arc::new(AtomicBool::new(false));
    let pids: Vec<u32> = kids.children.iter().map(|c| c.0).collect();
    {
        let (progress, finished, name) = (progress.clone(), finished.clone(), name.clone());
        std::thread::spawn(move || {
            let mut last = (progress.load(Ordering::Relaxed), Instant::now());
            while !finished.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let p = progress.load(Ordering::Relaxed);
                if p != last.0 {
                    last = (p, Instant::now());
                } else if last.1.elapsed() > Duration::from_secs(5) {
                    eprintln!("watchdog: no progress for 5 s");
                    if let Ok(view) = SharedPool::<Msg>::attach(&name, fp()) {
                        let a = view.audit();
                        eprintln!("watchdog: audit: {a}");
                        if !a.stuck_rings.is_empty() {
                            eprintln!(
                                "watchdog: a process died inside a ring operation: the ring \
                                 is wedged for good (the unrecoverable case, see DESIGN.md)"
                            );
                        }
                    }
                    for pid in &pids {
                        // SAFETY: plain syscall on our children's pids.
                        unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
                    }
                    let _ = SharedPool::<Msg>::remove(&name);
                    std::process::exit(2);
                }
            }
        });
    }

    let me = std::process::id();
    let child_pids: Vec<u32> = kids.children.iter().map(|c| c.0).collect();
    let total = args.items;
    let mut seen = vec![false; total as usize];
    let (mut sent, mut replies, mut news, mut bad, mut dup) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut killed: Option<u32> = None;
    let mut stops_sent = false;
    let mut out: Vec<SharedHandle<Msg>> = Vec::with_capacity(32);
    let mut got: Vec<SharedHandle<Msg>> = Vec::with_capacity(64);
    let start = Instant::now();
    loop {
        // Send work while the pool has objects (the pool is the flow control).
        while sent < total && out.len() < 32 && sent - replies < capacity as u64 / 2 {
            match pool.get() {
                Ok(mut h) => {
                    stamp(pool.get_mut(&mut h), WORK, me, sent);
                    out.push(h);
                    sent += 1;
                }
                Err(_) => break,
            }
        }
        pool.send_bulk(TO_SECONDARIES, &mut out);
        // Verify and put back what comes back.
        pool.recv_burst(TO_PRIMARY, &mut got, 64);
        for h in got.drain(..) {
            let m = *pool.get_ref(&h);
            let from_child = child_pids.contains(&m.pid);
            match m.kind {
                REPLY if valid(&m) && from_child && m.seq < total => {
                    if std::mem::replace(&mut seen[m.seq as usize], true) {
                        dup += 1;
                    }
                    replies += 1;
                }
                NEW if valid(&m) && from_child => news += 1,
                _ => bad += 1,
            }
            pool.put(h);
        }
        progress.store(sent + replies + news, Ordering::Relaxed);

        if args.kill && killed.is_none() && sent >= total / 2 {
            let (pid, child, done) = &mut kids.children[0];
            // SAFETY: plain syscall on our child's pid.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
            child.wait().expect("reap the victim");
            *done = true;
            killed = Some(*pid);
            println!(
                "kill: SIGKILL to secondary 0 (pid {pid}) after {sent} work items sent, \
                 {replies} replies received"
            );
            for p in pool.processes().iter().filter(|p| p.process.pid == *pid) {
                println!(
                    "  its slot {}: alive {}, {} cached, {} held",
                    p.slot, p.alive, p.cached, p.held
                );
            }
            let rep = pool.reclaim_dead();
            println!("  reclaim_dead (others still running): {rep}");
            let n = pool.reclaim_in_use_of_dead();
            println!("  reclaim_in_use_of_dead: {n} object(s) returned to the ring");
        }

        if sent == total && !stops_sent {
            let survivors = kids.children.iter().filter(|c| !c.2).count();
            for _ in 0..survivors {
                let mut h = loop {
                    if let Ok(h) = pool.get() {
                        break h;
                    }
                    // Objects are all out: take replies back first.
                    pool.recv_burst(TO_PRIMARY, &mut got, 64);
                    for h in got.drain(..) {
                        let m = *pool.get_ref(&h);
                        match m.kind {
                            REPLY if valid(&m) && m.seq < total => {
                                if std::mem::replace(&mut seen[m.seq as usize], true) {
                                    dup += 1;
                                }
                                replies += 1;
                            }
                            NEW if valid(&m) => news += 1,
                            _ => bad += 1,
                        }
                        pool.put(h);
                    }
                };
                stamp(pool.get_mut(&mut h), STOP, me, 0);
                pool.send(TO_SECONDARIES, h);
            }
            stops_sent = true;
        }
        if stops_sent {
            let mut all_done = true;
            for (_, c, done) in kids.children.iter_mut() {
                if !*done {
                    match c.try_wait() {
                        Ok(Some(st)) => {
                            *done = true;
                            if !st.success() {
                                bad += 1;
                            }
                        }
                        _ => all_done = false,
                    }
                }
            }
            if all_done && pool.channel_count(TO_PRIMARY) == 0 {
                break;
            }
        }
    }
    finished.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let missing = total - replies;
    println!(
        "primary: sent {sent} work, received {replies} replies + {news} new in {secs:.2} s \
         ({:.0} objects/s through the channels), bad {bad}, duplicates {dup}, \
         replies missing {missing}",
        (sent + replies + news) as f64 / secs
    );
    if let Some(pid) = killed {
        println!(
            "  the {missing} missing replies are the work items that died with pid {pid}; \
             their objects were reclaimed"
        );
    }
    // Everyone else has exited: the census is exact now.
    let audit = pool.audit();
    println!("audit: {audit}");
    let mut repaired = 0;
    if !audit.lost_free.is_empty() || !audit.lost_in_channel.is_empty() {
        // SAFETY: every secondary has exited (waited above); this is the only attachment.
        repaired = unsafe { pool.repair_lost() };
        println!(
            "  {repaired} object(s) lost in flight by the killed process (taken out of a ring \
             or channel, not yet recorded) returned by repair_lost"
        );
    }
    pool.flush();
    let audit = pool.audit();
    let ok = audit.is_consistent()
        && pool.available() == capacity as usize
        && bad == 0
        && dup == 0
        && (killed.is_some() || missing == 0)
        && pool.corrupt_entries() == 0;
    println!(
        "conservation: available {} == capacity {capacity}, in use {}, corrupt entries {}, \
         reclaimed/repaired {repaired}: {}",
        pool.available(),
        pool.in_use(),
        pool.corrupt_entries(),
        if ok { "OK" } else { "FAILED" }
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
