//! One pool, many processes: a primary and N secondaries exchange handles through a shared
//! region.
//!
//! ```text
//! cargo run --release --example multiproc -- [--quick] [--kill] [--procs N] [--items M]
//! ```
//!
//! The primary creates the pool (hugetlbfs if mounted, else /dev/shm) and runs N copies of this
//! binary with `--secondary`. Each secondary attaches by name (at whatever address its kernel
//! picks) and gets two channels of its own: an inbox (channel 2i) and an outbox (2i+1). It
//! takes WORK messages from its inbox, checks the primary's stamp, restamps the same object as
//! a REPLY with its pid and sends it back through its outbox; every 4th message it also takes
//! a fresh object from the pool and sends it as NEW. The primary deals work round-robin,
//! verifies every object it receives (checksum, sender pid, no sequence number twice) and puts
//! it back. At the end it audits the region: every object must be back (available ==
//! capacity).
//!
//! With `--kill` the pool is created by a separate creator process (which takes a few objects
//! and keeps some cached), and the primary sends SIGKILL to secondary 0 *and to the creator*
//! halfway through and recovers while the others keep running: `reclaim_dead` (their slots and
//! cached objects), `reclaim_in_use_of_dead` (the objects they held) and `reset_channel` on the
//! victim's inbox (work it never took). Then it starts a new secondary 0, a process that
//! attaches after the creator died (any live member keeps the region joinable).
//! A kill inside an operation on a ring (the common ring during a cache refill or flush, or a
//! channel) is completed by the next process that needs that ring (the
//! rings carry redo records, see DESIGN.md), so nothing is lost and nothing waits: the run
//! fails if `repair_lost` finds anything. A watchdog still exits with status 2 instead of
//! hanging if no progress is made for 5 s.
//!
//! `--quick` runs 100 000 work items with 3 secondaries (10 000 in a debug build).

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

/// Channel that carries work to secondary `i` (only it receives there).
fn inbox(i: u32) -> u32 {
    2 * i
}

/// Channel that carries secondary `i`'s replies to the primary (only it sends there).
fn outbox(i: u32) -> u32 {
    2 * i + 1
}

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
    /// `--secondary NAME INDEX PRIMARY_PID`.
    secondary: Option<(String, u32, u32)>,
    /// `--creator NAME SECONDARIES` (with `--kill`: the process that creates the pool).
    creator: Option<(String, u32)>,
    procs: u32,
    items: u64,
    kill: bool,
    quick: bool,
}

/// `--help`: what the example measures and how long it takes.
const HELP: &str = "\
multiproc: one idxpool shared by several processes (idxpool::shared::SharedPool).

A primary creates the pool (hugetlbfs if mounted, else /dev/shm) and starts N secondaries
(copies of this binary); they exchange objects through per-process handle channels, the
primary checks every object it gets back and audits the region at the end (every object
back). Prints messages per second and the audit. With --kill, a separate creator process
creates the pool, and secondary 0 and the creator are SIGKILLed halfway: the primary recovers
their slots, cached objects and held objects, then starts a new secondary 0, which attaches
after the creator's death.

usage: multiproc [--quick] [--kill] [--procs N] [--items M]
  --quick     100 000 items, 3 secondaries: about 3 s (release build)
  --kill      kill secondary 0 and the creator halfway, recover, start a new secondary 0
  --procs N   secondaries (default 4)
  --items M   work items (default 400 000: about 15 s in a release build)
";

fn parse_args() -> Args {
    let mut a = Args {
        secondary: None,
        creator: None,
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
                a.secondary = Some((
                    v[i + 1].clone(),
                    v[i + 2].parse().expect("index"),
                    v[i + 3].parse().expect("primary pid"),
                ));
                i += 3;
            }
            "--creator" => {
                a.creator = Some((v[i + 1].clone(), v[i + 2].parse().expect("secondaries")));
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
                print!("{HELP}");
                std::process::exit(0);
            }
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    if a.quick {
        // Debug builds are ~10x slower: keep --quick under 20 s there too.
        a.items = a.items.min(if cfg!(debug_assertions) {
            10_000
        } else {
            100_000
        });
        a.procs = a.procs.min(3);
    }
    a
}

fn main() -> ExitCode {
    let args = parse_args();
    if let Some((name, procs)) = &args.creator {
        return creator(name, *procs);
    }
    match &args.secondary {
        Some((name, idx, primary_pid)) => secondary(name, *idx, *primary_pid),
        None => primary(&args),
    }
}

const CAPACITY: u32 = 4096;

fn options(procs: u32) -> SharedOptions {
    // Slots: the primary, the secondaries, and (with --kill) the creator.
    SharedOptions {
        cache_size: Some(32),
        channels: 2 * procs,
        max_processes: procs + 2,
        ..SharedOptions::default()
    }
}

/// With `--kill`: creates the pool, takes a few objects (some held, some back in its cache)
/// and waits to be killed (or until its parent is gone).
fn creator(name: &str, procs: u32) -> ExitCode {
    let pool = match SharedPool::<Msg>::create(name, CAPACITY, fp(), options(procs)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("creator: create failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut held = Vec::new();
    pool.get_bulk(&mut held, 8).expect("8 objects");
    let mut back: Vec<_> = held.drain(..3).collect();
    pool.put_bulk(&mut back);
    println!(
        "  creator: pid {}, slot {}, holds {} objects, {} cached",
        std::process::id(),
        pool.slot(),
        held.len(),
        pool.cache_count()
    );
    // SAFETY: plain syscall.
    let parent = unsafe { libc::getppid() };
    let t0 = Instant::now();
    // SAFETY: plain syscall.
    while unsafe { libc::getppid() } == parent && t0.elapsed() < Duration::from_secs(600) {
        std::thread::sleep(Duration::from_millis(50));
    }
    pool.put_bulk(&mut held);
    ExitCode::SUCCESS
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

fn secondary(name: &str, idx: u32, primary_pid: u32) -> ExitCode {
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
    let (mut received, mut bad, mut replies, mut news) = (0u64, 0u64, 0u64, 0u64);
    let mut batch: Vec<SharedHandle<Msg>> = Vec::with_capacity(16);
    let mut out: Vec<SharedHandle<Msg>> = Vec::with_capacity(32);
    let mut sink = 0u64;
    let mut idle_since = Instant::now();
    let mut stop = false;
    while !stop {
        if pool.recv_burst(inbox(idx), &mut batch, 16) == 0 {
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
            if m.kind == STOP {
                stop = true;
                pool.put(h);
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
        pool.send_bulk(outbox(idx), &mut out);
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

/// What the primary received.
#[derive(Default)]
struct Tally {
    seen: Vec<bool>,
    child_pids: Vec<u32>,
    replies: u64,
    news: u64,
    bad: u64,
    dup: u64,
}

impl Tally {
    /// Receives, verifies and puts back everything waiting on `chan`.
    fn drain(&mut self, pool: &SharedPool<Msg>, chan: u32) {
        let mut got = Vec::with_capacity(64);
        while pool.recv_burst(chan, &mut got, 64) > 0 {
            for h in got.drain(..) {
                let m = *pool.get_ref(&h);
                let from_child = self.child_pids.contains(&m.pid);
                match m.kind {
                    REPLY if valid(&m) && from_child && m.seq < self.seen.len() as u64 => {
                        if std::mem::replace(&mut self.seen[m.seq as usize], true) {
                            self.dup += 1;
                        }
                        self.replies += 1;
                    }
                    NEW if valid(&m) && from_child => self.news += 1,
                    _ => self.bad += 1,
                }
                pool.put(h);
            }
        }
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
    let capacity = CAPACITY;
    let exe = std::env::current_exe().expect("current_exe");
    // With --kill, a separate creator (killed halfway); else the primary creates the pool.
    let mut creator = None;
    let pool = if args.kill {
        let c = Command::new(&exe)
            .args(["--creator", &name, &args.procs.to_string()])
            .spawn()
            .expect("spawn creator");
        let pid = c.id();
        creator = Some(c);
        let t0 = Instant::now();
        loop {
            match SharedPool::<Msg>::attach(&name, fp()) {
                // Attached once the creator holds its objects (its slot shows them).
                Ok(p)
                    if p.processes()
                        .iter()
                        .any(|i| i.process.pid == pid && i.held > 0) =>
                {
                    break p
                }
                _ if t0.elapsed() > Duration::from_secs(10) => {
                    eprintln!("the creator did not create the pool within 10 s");
                    if let Some(c) = creator.as_mut() {
                        let _ = c.kill();
                        let _ = c.wait();
                    }
                    let _ = SharedPool::<Msg>::remove(&name);
                    return ExitCode::FAILURE;
                }
                _ => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    } else {
        match SharedPool::<Msg>::create(&name, capacity, fp(), options(args.procs)) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("create failed: {e}");
                return ExitCode::FAILURE;
            }
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
    let me = std::process::id();
    let spawn_secondary = |i: u32| {
        Command::new(&exe)
            .args(["--secondary", &name, &i.to_string(), &me.to_string()])
            .spawn()
            .expect("spawn secondary")
    };
    let mut kids = Secondaries {
        children: Vec::new(),
    };
    for i in 0..args.procs {
        let c = spawn_secondary(i);
        kids.children.push((c.id(), c, false));
    }

    // Start when every secondary has attached.
    let t0 = Instant::now();
    let others = if args.kill { 2 } else { 1 };
    while pool.processes().len() < args.procs as usize + others {
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
                            eprintln!("watchdog: a ring lock is held: {:?}", a.stuck_rings);
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

    let child_pids: Vec<u32> = kids.children.iter().map(|c| c.0).collect();
    let total = args.items;
    let mut t = Tally {
        seen: vec![false; total as usize],
        child_pids: child_pids.clone(),
        ..Default::default()
    };
    let mut sent = 0u64;
    let mut killed: Option<u32> = None;
    let mut returned_from_inbox = 0;
    let mut stops_sent = false;
    let mut out: Vec<SharedHandle<Msg>> = Vec::with_capacity(32);
    let mut next = 0u32;
    let start = Instant::now();
    loop {
        // Send work round-robin to live secondaries while the pool has objects (the pool and
        // a window of half its capacity are the flow control).
        while sent < total && out.len() < 32 && sent - t.replies < capacity as u64 / 2 {
            match pool.get() {
                Ok(mut h) => {
                    stamp(pool.get_mut(&mut h), WORK, me, sent);
                    out.push(h);
                    sent += 1;
                }
                Err(_) => break,
            }
        }
        if !out.is_empty() {
            while kids.children[next as usize].2 {
                next = (next + 1) % args.procs;
            }
            pool.send_bulk(inbox(next), &mut out);
            next = (next + 1) % args.procs;
        }
        // Verify and put back what comes back (also from a dead secondary's outbox: what it
        // published before dying is intact).
        for i in 0..args.procs {
            t.drain(&pool, outbox(i));
        }
        progress.store(sent + t.replies + t.news, Ordering::Relaxed);

        if args.kill && killed.is_none() && sent >= total / 2 {
            let (pid, child, done) = &mut kids.children[0];
            let pid = *pid;
            // SAFETY: plain syscall on our child's pid.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            child.wait().expect("reap the victim");
            *done = true;
            killed = Some(pid);
            let c = creator.as_mut().expect("the creator");
            let cpid = c.id();
            let _ = c.kill();
            c.wait().expect("reap the creator");
            println!(
                "kill: SIGKILL to secondary 0 (pid {pid}) and to the creator (pid {cpid}) \
                 after {sent} work items sent, {} replies received",
                t.replies
            );
            for p in pool.processes().iter() {
                if p.process.pid == pid || p.process.pid == cpid {
                    println!(
                        "  slot {} (pid {}): alive {}, {} cached, {} held",
                        p.slot, p.process.pid, p.alive, p.cached, p.held
                    );
                }
            }
            let rep = pool.reclaim_dead();
            println!("  reclaim_dead (others still running): {rep}");
            let n = pool.reclaim_in_use_of_dead();
            println!("  reclaim_in_use_of_dead: {n} object(s) returned to the ring");
            // Only the victim received on its inbox, and we no longer send there.
            returned_from_inbox = pool.reset_channel(inbox(0));
            println!(
                "  reset_channel(its inbox): {returned_from_inbox} unprocessed work item(s) \
                 returned to the ring"
            );
            // A new process joins after the creator's death, as the new secondary 0.
            let c = spawn_secondary(0);
            println!(
                "  new secondary 0: pid {}, started after the creator died",
                c.id()
            );
            t.child_pids.push(c.id());
            kids.children[0] = (c.id(), c, false);
        }

        if sent == total && !stops_sent {
            for i in 0..args.procs {
                if kids.children[i as usize].2 {
                    continue;
                }
                let mut h = loop {
                    if let Ok(h) = pool.get() {
                        break h;
                    }
                    // Objects are all out: take replies back first.
                    for j in 0..args.procs {
                        t.drain(&pool, outbox(j));
                    }
                };
                stamp(pool.get_mut(&mut h), STOP, me, 0);
                pool.send(inbox(i), h);
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
                                t.bad += 1;
                            }
                        }
                        _ => all_done = false,
                    }
                }
            }
            if all_done && (0..args.procs).all(|i| pool.channel_count(outbox(i)) == 0) {
                break;
            }
        }
    }
    finished.store(true, Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    let missing = total - t.replies;
    println!(
        "primary: sent {sent} work, received {} replies + {} new in {secs:.2} s \
         ({:.0} objects/s through the channels), bad {}, duplicates {}, \
         replies missing {missing}",
        t.replies,
        t.news,
        (sent + t.replies + t.news) as f64 / secs,
        t.bad,
        t.dup
    );
    if let Some(pid) = killed {
        println!(
            "  missing replies: {returned_from_inbox} work item(s) still in the victim's inbox \
             + {} it was working on when it died (pid {pid}); all their objects were reclaimed",
            missing - returned_from_inbox as u64
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
            "  {repaired} object(s) lost in flight by the killed process, returned by \
             repair_lost: a recovery bug (every transfer is recoverable)"
        );
    }
    pool.flush();
    let audit = pool.audit();
    if !pool.is_primary() {
        // The creator is gone: remove the (stale) name and its member links.
        let _ = SharedPool::<Msg>::remove(&name);
    }
    let ok = audit.is_consistent()
        && pool.available() == capacity as usize
        && t.bad == 0
        && t.dup == 0
        && (killed.is_some() || missing == 0)
        && pool.corrupt_entries() == 0
        && repaired == 0;
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
