//! Multi-process shared pool: attach at other addresses, layout and fingerprint
//! checks, concurrent attach/detach, kill -9 recovery, unlink semantics, permission errors.
//!
//! Child processes are this test binary run again with `--exact child_entry` and the role in
//! the `IDXPOOL_MP_ROLE` environment variable (no fork). Every test uses pool names unique to
//! its pid and removes its files in a guard's `Drop`, even when it fails.
#![cfg(all(target_os = "linux", not(loom)))]

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use idxpool::shared::{
    fingerprint, SharedBacking, SharedBackingPolicy, SharedHandle, SharedOptions, SharedPool,
};
use idxpool::{FlushPolicy, PoolError};

const ROLE: &str = "IDXPOOL_MP_ROLE";
const NAME: &str = "IDXPOOL_MP_NAME";
const PARENT_BASE: &str = "IDXPOOL_MP_BASE";
const PARENT_LEN: &str = "IDXPOOL_MP_LEN";

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
struct Obj {
    pid: u32,
    seq: u32,
    value: u64,
    tag: [u8; 16],
}

fn fp() -> u64 {
    fingerprint("tests/multiproc Obj v1")
}

/// A unique pool name; removes every file of that name when dropped.
struct Names {
    name: String,
    extra: Vec<std::path::PathBuf>,
}

impl Names {
    fn new(tag: &str) -> Self {
        Names {
            name: format!("idxpool-test-{}-{tag}", std::process::id()),
            extra: Vec::new(),
        }
    }
}

impl Drop for Names {
    fn drop(&mut self) {
        let _ = SharedPool::<u8>::remove(&self.name);
        for p in &self.extra {
            let _ = std::fs::remove_file(p);
            let _ = std::fs::remove_dir(p);
        }
    }
}

/// A child process killed (if still running) and reaped when dropped.
struct ChildGuard {
    child: Child,
    out: BufReader<ChildStdout>,
}

impl ChildGuard {
    fn spawn(role: &str, envs: &[(&str, String)]) -> ChildGuard {
        Self::spawn_with(role, envs, |_| {})
    }

    fn spawn_with(role: &str, envs: &[(&str, String)], f: impl FnOnce(&mut Command)) -> Self {
        Self::try_spawn_with(role, envs, f).expect("spawn child")
    }

    fn try_spawn_with(
        role: &str,
        envs: &[(&str, String)],
        f: impl FnOnce(&mut Command),
    ) -> std::io::Result<Self> {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .env(ROLE, role)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in envs {
            cmd.env(k, v);
        }
        f(&mut cmd);
        let mut child = cmd.spawn()?;
        let out = BufReader::new(child.stdout.take().unwrap());
        Ok(ChildGuard { child, out })
    }

    /// The next line starting with `MP:` (child protocol), without the prefix.
    fn line(&mut self) -> String {
        let mut l = String::new();
        loop {
            l.clear();
            let n = self.out.read_line(&mut l).unwrap();
            assert!(n > 0, "child closed its stdout without a protocol line");
            // The harness may print "test child_entry ... " before our line.
            if let Some(i) = l.find("MP:") {
                return l[i + 3..].trim_end().to_string();
            }
        }
    }

    fn wait_success(&mut self) {
        let st = self.child.wait().unwrap();
        assert!(st.success(), "child failed: {st}");
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn recv_timeout<T: Pod>(pool: &SharedPool<T>, chan: u32) -> SharedHandle<T> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(h) = pool.recv(chan) {
            return h;
        }
        assert!(
            Instant::now() < deadline,
            "nothing arrived on channel {chan}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn opts() -> SharedOptions {
    SharedOptions {
        cache_size: Some(8),
        channels: 2,
        max_processes: 8,
        ..SharedOptions::default()
    }
}

/// Entry point of child processes; a no-op in the normal test run.
#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let name = std::env::var(NAME).unwrap();
    match role.as_str() {
        "echo" => child_echo(&name),
        "hold" => child_hold(&name),
        "churn" => child_churn(&name),
        "victim" => child_victim(&name),
        "creator" => child_creator(&name),
        "joiner" => child_joiner(&name),
        "truncate" => child_truncate(&name),
        "holdexit" => {
            let pool = SharedPool::<Obj>::attach(&name, fp()).unwrap();
            let mut v = Vec::new();
            pool.get_bulk(&mut v, 6).unwrap();
            let mut back: Vec<_> = v.drain(..3).collect();
            pool.put_bulk(&mut back);
            println!("MP:READY pid {} slot {}", std::process::id(), pool.slot());
            std::mem::forget(v);
            // Dies without detaching (no destructor runs). Not SIGKILL: as pid 1 of its own
            // namespace it would ignore a signal it sends itself.
            // SAFETY: _exit ends the process at once; nothing runs after it.
            unsafe { libc::_exit(9) };
        }
        "attach" => match SharedPool::<Obj>::attach(&name, fp()) {
            Ok(p) => println!("MP:OK slot {}", p.slot()),
            Err(PoolError::SharedFile { op, source, .. }) => {
                println!("MP:ERR {op} {:?}", source.kind())
            }
            Err(e) => println!("MP:ERR other {e}"),
        },
        other => panic!("unknown role {other}"),
    }
}

/// Occupies the parent's address range, attaches (so the mapping must land elsewhere), checks
/// the object sent on channel 0 and answers on channel 1.
fn child_echo(name: &str) {
    let pbase: usize = std::env::var(PARENT_BASE).unwrap().parse().unwrap();
    let plen: usize = std::env::var(PARENT_LEN).unwrap().parse().unwrap();
    // SAFETY: an anonymous PROT_NONE reservation of a range this process does not use; with
    // MAP_FIXED_NOREPLACE it fails instead of replacing anything already there.
    let r = unsafe {
        libc::mmap(
            pbase as *mut libc::c_void,
            plen,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    let occupied =
        r as usize == pbase || std::io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST);
    assert!(occupied, "could not occupy the parent's range");
    let pool = SharedPool::<Obj>::attach(name, fp()).unwrap();
    let base = pool.base().as_ptr() as usize;
    assert!(
        base + pool.mapped_len() <= pbase || base >= pbase + plen,
        "mapping overlaps the occupied range"
    );
    println!("MP:BASE {base}");
    let mut h = recv_timeout(&pool, 0);
    let o = *pool.get_ref(&h);
    assert_eq!(o.value, 0xfeed_0000 + h.index() as u64);
    assert_eq!(&o.tag, b"from the parent.");
    let me = std::process::id();
    let m = pool.get_mut(&mut h);
    m.pid = me;
    m.value += 1;
    m.tag = *b"from the child..";
    pool.send(1, h);
    println!("MP:DONE");
}

/// Holds objects in every state a process can leave behind, then waits to be killed.
fn child_hold(name: &str) {
    let pool = SharedPool::<Obj>::attach(name, fp()).unwrap();
    let mut held = Vec::new();
    pool.get_bulk(&mut held, 40).unwrap();
    for (i, h) in held.iter_mut().enumerate() {
        pool.get_mut(h).seq = i as u32;
    }
    let mut back: Vec<_> = held.drain(..10).collect();
    pool.put_bulk(&mut back);
    let mut sent: Vec<_> = held.drain(..5).collect();
    pool.send_bulk(0, &mut sent);
    println!(
        "MP:READY held {} cached {} slot {}",
        held.len(),
        pool.cache_count(),
        pool.slot()
    );
    std::mem::forget(held);
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A small xorshift generator (no dependency needed for test randomness).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Every kind of operation, in a random mix, with a few objects always held, until killed (by
/// the parent, or by an armed kill point) or told to stop: on `pool` (a cache: refills,
/// flushes, cache gets and puts; channels 0 and 1) and on `flat` (no cache: every get and put
/// is a ring operation; channel 0).
fn pool_workload(
    pool: &SharedPool<Obj>,
    flat: &SharedPool<Obj>,
    rng: &mut Rng,
    reclaim: bool,
    stop: &dyn Fn() -> bool,
) {
    let mut held: Vec<SharedHandle<Obj>> = Vec::new();
    let mut flat_held: Vec<SharedHandle<Obj>> = Vec::new();
    let mut v = Vec::new();
    let mut i = 0u64;
    while !stop() {
        i += 1;
        match rng.below(12) {
            8 => {
                if let Ok(h) = flat.get() {
                    flat_held.push(h);
                }
            }
            9 => {
                if let Some(h) = flat_held.pop() {
                    flat.put(h);
                }
            }
            10 => {
                if let Some(h) = flat_held.pop() {
                    flat.send(0, h);
                }
            }
            11 => {
                if let Some(h) = flat.recv(0) {
                    flat_held.push(h);
                }
            }
            0 => {
                if pool.get_bulk(&mut v, 1 + rng.below(12) as usize).is_ok() {
                    for h in v.iter_mut() {
                        pool.get_mut(h).seq = i as u32;
                    }
                    pool.put_bulk(&mut v);
                }
            }
            1 => {
                if let Ok(h) = pool.get() {
                    held.push(h);
                }
            }
            2 => {
                if let Some(h) = held.pop() {
                    pool.put(h);
                }
            }
            3 => {
                pool.get_burst(&mut v, 1 + rng.below(6) as usize);
                pool.send_bulk(rng.below(2) as u32, &mut v);
            }
            4 => {
                pool.recv_burst(rng.below(2) as u32, &mut v, 1 + rng.below(8) as usize);
                pool.put_bulk(&mut v);
            }
            5 => {
                if let Some(h) = pool.recv(0) {
                    held.push(h);
                }
            }
            6 => pool.flush(),
            _ => {
                if reclaim && i.is_multiple_of(64) {
                    pool.reclaim_dead();
                }
            }
        }
        while held.len() > 8 {
            let h = held.remove(0);
            pool.put(h);
        }
        while flat_held.len() > 4 {
            let h = flat_held.remove(0);
            flat.put(h);
        }
    }
    pool.put_bulk(&mut held);
    flat.put_bulk(&mut flat_held);
}

/// The kill test's victim: attaches, arms a kill point if asked, reclaims dead slots (so a
/// kill inside reclaim is possible), then works until killed.
fn child_victim(name: &str) {
    let pool = SharedPool::<Obj>::attach(name, fp()).unwrap();
    let flat = SharedPool::<Obj>::attach(&format!("{name}-flat"), fp()).unwrap();
    let var = |k: &str| -> u32 { std::env::var(k).unwrap().parse().unwrap() };
    let (point, op, nth) = (
        var("IDXPOOL_MP_POINT"),
        var("IDXPOOL_MP_OP"),
        var("IDXPOOL_MP_NTH"),
    );
    println!("MP:READY");
    if point > 0 {
        idxpool::shared::arm_kill_point(point, op, nth);
    }
    pool.reclaim_dead();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    pool_workload(&pool, &flat, &mut rng, true, &|| false);
}

/// The creator of a pool pair (cached, cache-less), which works on both until it is
/// killed (by the parent, or by an armed kill point). Prints whether `create` replaced a stale
/// region of the same name.
fn child_creator(name: &str) {
    let o = SharedOptions {
        channels: 2,
        max_processes: 6,
        ..SharedOptions::default()
    };
    let pool = SharedPool::<Obj>::create(
        name,
        JOIN_CAP,
        fp(),
        SharedOptions {
            cache_size: Some(8),
            ..o.clone()
        },
    )
    .unwrap();
    let flat = SharedPool::<Obj>::create(
        &format!("{name}-flat"),
        JOIN_CAP,
        fp(),
        SharedOptions {
            cache_size: Some(0),
            ..o
        },
    )
    .unwrap();
    let var = |k: &str| -> u32 { std::env::var(k).unwrap().parse().unwrap() };
    let (point, op, nth) = (
        var("IDXPOOL_MP_POINT"),
        var("IDXPOOL_MP_OP"),
        var("IDXPOOL_MP_NTH"),
    );
    println!(
        "MP:READY replaced {} {}",
        pool.replaced_stale(),
        flat.replaced_stale()
    );
    // Armed once the parent is attached to both (else the region could die with us).
    let deadline = Instant::now() + Duration::from_secs(20);
    while [&pool, &flat]
        .iter()
        .any(|p| p.processes().iter().filter(|i| i.alive).count() < 2)
    {
        assert!(Instant::now() < deadline, "the parent did not attach");
        std::thread::sleep(Duration::from_millis(1));
    }
    if point > 0 {
        idxpool::shared::arm_kill_point(point, op, nth);
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ std::process::id() as u64);
    pool_workload(&pool, &flat, &mut rng, true, &|| false);
}

/// A process that starts after the creator died: attaches to both pools, recovers
/// what the dead creator left (its held objects, channels, caches, an operation it was inside
/// of), and checks that every object is accounted for and can be taken exactly once.
fn child_joiner(name: &str) {
    let pool = SharedPool::<Obj>::attach(name, fp()).unwrap();
    let flat = SharedPool::<Obj>::attach(&format!("{name}-flat"), fp()).unwrap();
    for p in [&pool, &flat] {
        assert!(p.is_sealed() && !p.is_primary());
        p.reclaim_in_use_of_dead();
        for c in 0..p.channels() {
            p.reset_channel(c);
        }
        p.flush();
        let a = p.audit();
        assert!(a.is_consistent() && a.in_ring == JOIN_CAP as usize, "{a}");
        assert_eq!(p.available(), JOIN_CAP as usize);
        assert_eq!(p.corrupt_entries(), 0);
        let mut all = Vec::new();
        p.get_bulk(&mut all, JOIN_CAP as usize).unwrap();
        let mut idx: Vec<u32> = all.iter().map(|h| h.index()).collect();
        idx.sort_unstable();
        assert_eq!(idx, (0..JOIN_CAP).collect::<Vec<_>>());
        for h in all.iter_mut() {
            p.get_mut(h).seq = 25;
        }
        p.put_bulk(&mut all);
        let h = p.get().unwrap();
        p.put(h);
        p.flush();
    }
    println!("MP:JOINED slot {}", pool.slot());
}

/// Capacity of the pools of the creator-kill test.
const JOIN_CAP: u32 = 96;

/// A misbehaving peer: tries to shrink the region file (`set_len(0)`), to re-create it with
/// `O_TRUNC`, then replaces the name by an empty file. Prints what each attempt gave.
fn child_truncate(name: &str) {
    let path = std::path::Path::new("/dev/shm").join(name);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let shrink = f.set_len(0).map_err(|e| e.kind());
    let otrunc = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .map(|_| ())
        .map_err(|e| e.kind());
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, b"not a pool").unwrap();
    println!("MP:TRUNC {shrink:?} {otrunc:?}");
}

/// Attaches and detaches in a loop, touching a few objects each time.
fn child_churn(name: &str) {
    let mut full = 0;
    for round in 0..30u32 {
        let pool = match SharedPool::<Obj>::attach(name, fp()) {
            Ok(p) => p,
            Err(PoolError::NoProcessSlot { .. }) => {
                full += 1;
                std::thread::yield_now();
                continue;
            }
            Err(e) => panic!("{e}"),
        };
        let mut v = Vec::new();
        if pool.get_bulk(&mut v, 3).is_ok() {
            for h in v.iter_mut() {
                pool.get_mut(h).seq = round;
            }
            pool.put_bulk(&mut v);
        }
    }
    println!("MP:CHURN full {full}");
}

#[test]
fn two_mappings_in_one_process_resolve_one_object() {
    let g = Names::new("twomap");
    let a = SharedPool::<Obj>::create(&g.name, 64, fp(), opts()).unwrap();
    // While `a` maps the region, a second mapping necessarily lands elsewhere.
    let b = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    assert_ne!(a.base(), b.base());
    assert_ne!(a.slot(), b.slot());
    let mut h = a.get().unwrap();
    let idx = h.index();
    *a.get_mut(&mut h) = Obj {
        pid: 1,
        seq: 2,
        value: 3,
        tag: *b"through mapping1",
    };
    let addr_a = a.get_ref(&h) as *const Obj as usize - a.base().as_ptr() as usize;
    a.send(0, h);
    let mut h = b.recv(0).expect("sent on channel 0");
    assert_eq!(h.index(), idx, "same index in both mappings");
    let addr_b = b.get_ref(&h) as *const Obj as usize - b.base().as_ptr() as usize;
    assert_eq!(addr_a, addr_b, "same offset from each mapping's base");
    assert_eq!(b.get_ref(&h).tag, *b"through mapping1");
    b.get_mut(&mut h).tag = *b"through mapping2";
    b.send(1, h);
    let h = a.recv(1).unwrap();
    assert_eq!(a.get_ref(&h).tag, *b"through mapping2");
    // A handle held by `a` is refused by `b` (owner table check).
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = b.get_ref(&h);
    }));
    assert!(r.is_err(), "b must not access an object a holds");
    a.put(h);
    drop(b);
    let audit = a.audit();
    assert!(audit.is_consistent(), "{audit}");
    assert_eq!(a.available(), 64);
    assert_eq!(a.corrupt_entries(), 0);
}

#[test]
fn child_process_attaches_at_another_address() {
    let g = Names::new("child");
    let pool = SharedPool::<Obj>::create(&g.name, 128, fp(), opts()).unwrap();
    let mut h = pool.get().unwrap();
    let idx = h.index();
    *pool.get_mut(&mut h) = Obj {
        pid: std::process::id(),
        seq: 0,
        value: 0xfeed_0000 + idx as u64,
        tag: *b"from the parent.",
    };
    pool.send(0, h);
    let base = pool.base().as_ptr() as usize;
    let mut child = ChildGuard::spawn(
        "echo",
        &[
            (NAME, g.name.clone()),
            (PARENT_BASE, base.to_string()),
            (PARENT_LEN, pool.mapped_len().to_string()),
        ],
    );
    let cbase: usize = child.line().strip_prefix("BASE ").unwrap().parse().unwrap();
    assert!(cbase + pool.mapped_len() <= base || cbase >= base + pool.mapped_len());
    let h = recv_timeout(&pool, 1);
    assert_eq!(h.index(), idx);
    let o = *pool.get_ref(&h);
    assert_eq!(o.value, 0xfeed_0000 + idx as u64 + 1);
    assert_eq!(&o.tag, b"from the child..");
    assert_ne!(o.pid, std::process::id());
    pool.put(h);
    assert_eq!(child.line(), "DONE");
    child.wait_success();
    let audit = pool.audit();
    assert!(audit.is_consistent(), "{audit}");
    assert_eq!(pool.available(), 128);
    assert!(pool.processes().iter().all(|p| p.is_self));
}

fn layout_field<T>(r: Result<T, PoolError>) -> &'static str {
    match r {
        Err(PoolError::LayoutMismatch { field, .. }) => field,
        Err(e) => panic!("expected a layout mismatch, got {e}"),
        Ok(_) => panic!("expected a layout mismatch, got a pool"),
    }
}

fn file_kind<T>(r: Result<T, PoolError>) -> (&'static str, std::io::ErrorKind) {
    match r {
        Err(PoolError::SharedFile { op, source, .. }) => (op, source.kind()),
        Err(e) => panic!("expected a file error, got {e}"),
        Ok(_) => panic!("expected a file error, got a pool"),
    }
}

#[test]
fn layout_and_fingerprint_mismatches_are_typed_errors() {
    let mut g = Names::new("layout");
    let pool = SharedPool::<[u64; 4]>::create(&g.name, 32, 1, opts()).unwrap();
    assert!(matches!(
        SharedPool::<[u64; 4]>::attach(&g.name, 2),
        Err(PoolError::FingerprintMismatch {
            expected: 2,
            found: 1
        })
    ));
    // Same size (32), other alignment.
    assert_eq!(
        layout_field(SharedPool::<[u32; 8]>::attach(&g.name, 1)),
        "obj_align"
    );
    assert_eq!(
        layout_field(SharedPool::<[u64; 5]>::attach(&g.name, 1)),
        "obj_size"
    );
    // Corrupt the version, then the magic, through a mapping of the file.
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(pool.path())
        .unwrap();
    // SAFETY: a test mapping of the pool's file; bytes 0..16 are the magic and version.
    let mut m = unsafe { memmap2::MmapOptions::new().len(4096).map_mut(&f).unwrap() };
    m[8] ^= 0x40;
    assert_eq!(
        layout_field(SharedPool::<[u64; 4]>::attach(&g.name, 1)),
        "version"
    );
    m[8] ^= 0x40;
    m[0] ^= 1;
    assert_eq!(
        layout_field(SharedPool::<[u64; 4]>::attach(&g.name, 1)),
        "magic"
    );
    m[0] ^= 1;
    SharedPool::<[u64; 4]>::attach(&g.name, 1).expect("restored header attaches");
    drop(m);
    // Files that are no pool: too short, or zeros.
    let short = format!("/dev/shm/{}-short", g.name);
    let zeros = format!("/dev/shm/{}-zeros", g.name);
    g.extra.push(short.clone().into());
    g.extra.push(zeros.clone().into());
    std::fs::write(&short, b"tiny").unwrap();
    std::fs::write(&zeros, vec![0u8; 8192]).unwrap();
    assert_eq!(
        layout_field(SharedPool::<[u64; 4]>::attach(&short, 1)),
        "file_len"
    );
    assert_eq!(
        layout_field(SharedPool::<[u64; 4]>::attach(&zeros, 1)),
        "magic"
    );
    // Missing name, taken name, bad parameters.
    let missing = format!("{}-missing", g.name);
    assert_eq!(
        file_kind(SharedPool::<[u64; 4]>::attach(&missing, 1)),
        ("open", std::io::ErrorKind::NotFound)
    );
    assert_eq!(
        file_kind(SharedPool::<[u64; 4]>::create(&g.name, 32, 1, opts())),
        ("create", std::io::ErrorKind::AlreadyExists)
    );
    for bad in [
        SharedPool::<[u64; 4]>::create(&missing, 0, 1, opts()),
        SharedPool::<[u64; 4]>::create(
            &missing,
            4,
            1,
            SharedOptions {
                cache_size: Some(8),
                ..opts()
            },
        ),
        SharedPool::<[u64; 4]>::create(
            &missing,
            32,
            1,
            SharedOptions {
                max_processes: 0,
                ..opts()
            },
        ),
        SharedPool::<[u64; 4]>::create("a/b", 32, 1, opts()),
        SharedPool::<[u64; 4]>::create("", 32, 1, opts()),
    ] {
        assert!(
            matches!(bad, Err(PoolError::InvalidConfig { .. })),
            "{bad:?}"
        );
    }
    assert!(!std::path::Path::new(&format!("/dev/shm/{missing}")).exists());
}

#[test]
fn concurrent_attach_and_detach() {
    let g = Names::new("churn");
    let cap = 256;
    let primary = SharedPool::<Obj>::create(
        &g.name,
        cap,
        fp(),
        SharedOptions {
            max_processes: 5,
            ..opts()
        },
    )
    .unwrap();
    let mut children: Vec<ChildGuard> = (0..2)
        .map(|_| ChildGuard::spawn("churn", &[(NAME, g.name.clone())]))
        .collect();
    let full: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let name = g.name.clone();
                s.spawn(move || {
                    let mut full = 0;
                    for round in 0..40u32 {
                        let pool = match SharedPool::<Obj>::attach(&name, fp()) {
                            Ok(p) => p,
                            Err(PoolError::NoProcessSlot { slots: 5 }) => {
                                full += 1;
                                std::thread::yield_now();
                                continue;
                            }
                            Err(e) => panic!("{e}"),
                        };
                        let mut v = Vec::new();
                        if pool.get_bulk(&mut v, 4).is_ok() {
                            for h in v.iter_mut() {
                                pool.get_mut(h).seq = t * 1000 + round;
                            }
                            pool.put_bulk(&mut v);
                        }
                    }
                    full
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    for c in children.iter_mut() {
        assert!(c.line().starts_with("CHURN"));
        c.wait_success();
    }
    println!(
        "attaches {}, refused for lack of a slot {full}",
        primary.attach_count()
    );
    assert_eq!(primary.processes().len(), 1, "only the primary is attached");
    let audit = primary.audit();
    assert!(audit.is_consistent(), "{audit}");
    assert_eq!(primary.available(), cap as usize);
    assert_eq!(primary.corrupt_entries(), 0);
}

#[test]
fn kill9_recovery_conserves_every_object() {
    let g = Names::new("kill");
    let cap = 256u32;
    let pool = SharedPool::<Obj>::create(
        &g.name,
        cap,
        fp(),
        SharedOptions {
            cache_size: Some(16),
            channels: 1,
            ..opts()
        },
    )
    .unwrap();
    let mut child = ChildGuard::spawn("hold", &[(NAME, g.name.clone())]);
    let ready = child.line();
    let nums: Vec<u32> = ready
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let (held, cached, slot) = (nums[0] as usize, nums[1] as usize, nums[2]);
    assert_eq!(held, 25);
    let info = pool.processes();
    let c = info.iter().find(|p| p.slot == slot).expect("child's slot");
    assert!(c.alive && !c.is_self);
    assert_eq!(c.held as usize, held);
    assert_eq!(c.cached as usize, cached);
    let pid = c.process.pid;

    // SAFETY: plain syscall; the pid is our child, not yet reaped.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    child.child.wait().unwrap();
    let c = pool
        .processes()
        .into_iter()
        .find(|p| p.slot == slot)
        .unwrap();
    assert!(!c.alive, "a killed (reaped) process is dead");

    // Several reclaimers at once (each its own attachment): the dead slot is freed once.
    let reps: Vec<_> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                let name = g.name.clone();
                s.spawn(move || {
                    let p = SharedPool::<Obj>::attach(&name, fp()).unwrap();
                    p.reclaim_dead()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let freed: u32 = reps.iter().map(|r| r.slots_freed).sum();
    let returned: usize = reps.iter().map(|r| r.cached_returned).sum();
    let rep = reps
        .iter()
        .find(|r| r.slots_freed == 1)
        .expect("one reclaimer won");
    assert_eq!(freed, 1, "{reps:?}");
    assert_eq!(rep.dead_pids, vec![pid]);
    assert_eq!(returned, cached);
    assert_eq!(rep.in_use_of_dead, held);
    let rep = pool.reclaim_dead();
    assert_eq!(
        (rep.slots_freed, rep.in_use_of_dead),
        (0, held),
        "idempotent"
    );
    let audit = pool.audit();
    assert_eq!(audit.held_orphaned, held, "{audit}");
    assert_eq!(audit.in_channels, 5);

    // What the dead process sent is still deliverable.
    let mut v = Vec::new();
    assert_eq!(pool.recv_burst(0, &mut v, 64), 5);
    pool.put_bulk(&mut v);
    assert_eq!(pool.reclaim_in_use_of_dead(), held);
    assert_eq!(pool.reclaim_in_use_of_dead(), 0);
    let audit = pool.audit();
    assert!(audit.is_consistent(), "{audit}");
    assert_eq!(pool.available(), cap as usize);
    // Every object can be taken again, exactly once.
    let mut all = Vec::new();
    pool.get_bulk(&mut all, cap as usize).unwrap();
    let mut idx: Vec<u32> = all.iter().map(|h| h.index()).collect();
    idx.sort_unstable();
    assert_eq!(idx, (0..cap).collect::<Vec<_>>());
    pool.put_bulk(&mut all);
    assert_eq!(pool.corrupt_entries(), 0);
}

#[test]
fn dropped_attachment_leaves_orphans_that_can_be_reclaimed() {
    let g = Names::new("orphan");
    let pool = SharedPool::<Obj>::create(&g.name, 64, fp(), opts()).unwrap();
    let other = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    let mut v = Vec::new();
    other.get_bulk(&mut v, 6).unwrap();
    let raw: Vec<u32> = v.into_iter().map(SharedHandle::into_raw).collect();
    drop(other);
    let rep = pool.reclaim_dead();
    assert_eq!((rep.slots_freed, rep.in_use_of_dead), (0, 6), "{rep}");
    assert_eq!(pool.reclaim_in_use_of_dead(), 6);
    assert!(pool.audit().is_consistent());
    // A stale raw index is refused: the object is not held by this attachment.
    // SAFETY: deliberately a stale index, to check the owner-table refusal (it panics before
    // any access).
    let stale: SharedHandle<Obj> = unsafe { SharedHandle::from_raw(&pool, raw[0]) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.put(stale)));
    assert!(r.is_err());
    assert_eq!(pool.available(), 64);
}

#[test]
fn unlink_on_drop_and_explicit_unlink() {
    let g = Names::new("unlink");
    let primary = SharedPool::<Obj>::create(&g.name, 32, fp(), opts()).unwrap();
    let path = primary.path().to_path_buf();
    let secondary = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    let mut h = secondary.get().unwrap();
    secondary.get_mut(&mut h).value = 77;
    drop(primary);
    assert!(!path.exists(), "the creator's drop removes the name");
    assert_eq!(
        file_kind(SharedPool::<Obj>::attach(&g.name, fp())),
        ("open", std::io::ErrorKind::NotFound)
    );
    // The secondary keeps working on its mapping.
    assert_eq!(secondary.get_ref(&h).value, 77);
    secondary.put(h);
    let mut v = Vec::new();
    secondary.get_bulk(&mut v, 32).unwrap();
    secondary.put_bulk(&mut v);
    assert!(secondary.audit().is_consistent());
    assert_eq!(
        file_kind(secondary.unlink()),
        ("unlink", std::io::ErrorKind::NotFound),
        "name already gone"
    );
    drop(secondary);

    // Explicit unlink while attached; and a name kept on drop.
    let p = SharedPool::<Obj>::create(
        &g.name,
        32,
        fp(),
        SharedOptions {
            unlink_on_drop: false,
            ..opts()
        },
    )
    .unwrap();
    let path = p.path().to_path_buf();
    drop(p);
    assert!(path.exists(), "unlink_on_drop(false) keeps the name");
    let s = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    s.unlink().unwrap();
    assert!(!path.exists());
    assert_eq!(
        file_kind(SharedPool::<Obj>::attach(&g.name, fp())),
        ("open", std::io::ErrorKind::NotFound)
    );
    let h = s.get().unwrap();
    s.put(h);
    assert!(!SharedPool::<Obj>::remove(&g.name).unwrap());
}

#[test]
fn permission_and_path_errors() {
    let mut g = Names::new("perm");
    // A directory where a region file is expected.
    let dir = format!("/dev/shm/{}-dir", g.name);
    std::fs::create_dir(&dir).unwrap();
    g.extra.push(dir.clone().into());
    assert_eq!(
        file_kind(SharedPool::<Obj>::attach(&dir, fp())),
        ("open", std::io::ErrorKind::IsADirectory)
    );
    let in_missing_dir = format!("/dev/shm/{}-nodir/pool", g.name);
    assert_eq!(
        file_kind(SharedPool::<Obj>::create(&in_missing_dir, 8, fp(), opts())).1,
        std::io::ErrorKind::NotFound
    );

    // Mode 0600 file of this user: another user is refused. Root bypasses permission checks
    // on files, so the refused attach runs in a child that drops to uid/gid 65534 (nobody).
    let _pool = SharedPool::<Obj>::create(&g.name, 8, fp(), opts()).unwrap();
    // SAFETY: plain syscall.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        // Not root: the permission check applies to this process directly.
        let path = _pool.path().to_path_buf();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        assert_eq!(
            file_kind(SharedPool::<Obj>::attach(&g.name, fp())),
            ("open", std::io::ErrorKind::PermissionDenied)
        );
        return;
    }
    let run_as_nobody = |name: &str| {
        let mut c = ChildGuard::try_spawn_with("attach", &[(NAME, name.to_string())], |cmd| {
            use std::os::unix::process::CommandExt;
            cmd.uid(65534).gid(65534);
        })
        .ok()?;
        let l = c.line();
        c.wait_success();
        Some(l)
    };
    let Some(refused) = run_as_nobody(&g.name) else {
        // E.g. the test binary lies under a directory user nobody cannot traverse.
        println!("skipped: cannot run the test binary as uid 65534 here");
        return;
    };
    assert_eq!(refused, "ERR open PermissionDenied");
    // With mode 0666 the same user may attach.
    let g2 = Names::new("perm666");
    let _p2 = SharedPool::<Obj>::create(
        &g2.name,
        8,
        fp(),
        SharedOptions {
            mode: 0o666,
            ..opts()
        },
    )
    .unwrap();
    assert!(run_as_nobody(&g2.name).unwrap().starts_with("OK"));
}

#[test]
fn backing_is_hugetlbfs_when_mounted_else_shm() {
    let g = Names::new("backing");
    let hugetlbfs = std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"));
    let auto = SharedPool::<Obj>::create(&g.name, 1000, fp(), opts()).unwrap();
    let shm = {
        let g2 = Names::new("backing-shm");
        let p = SharedPool::<Obj>::create(
            &g2.name,
            1000,
            fp(),
            SharedOptions {
                backing: SharedBackingPolicy::Require(SharedBacking::Shm),
                ..opts()
            },
        )
        .unwrap();
        assert_eq!(p.backing(), SharedBacking::Shm);
        assert_eq!(p.mapped_len() % 4096, 0);
        assert!(p.path().starts_with("/dev/shm"));
        p.backing()
    };
    assert_eq!(shm, SharedBacking::Shm);
    let req = SharedPool::<Obj>::create(
        &format!("{}-req", g.name),
        16,
        fp(),
        SharedOptions {
            backing: SharedBackingPolicy::Require(SharedBacking::Hugetlbfs),
            ..opts()
        },
    );
    let _cleanup = Names {
        name: format!("{}-req", g.name),
        extra: Vec::new(),
    };
    if hugetlbfs && auto.backing() == SharedBacking::Hugetlbfs {
        assert_eq!(auto.page_size(), 2 << 20);
        assert_eq!(auto.mapped_len() % (2 << 20), 0);
        let req = req.unwrap();
        assert_eq!(req.backing(), SharedBacking::Hugetlbfs);
    } else if !hugetlbfs {
        assert_eq!(auto.backing(), SharedBacking::Shm);
        assert!(matches!(req, Err(PoolError::BackingUnavailable { .. })));
    } else {
        // Mounted but could not hold the region (no free huge pages): Auto fell back.
        println!(
            "hugetlbfs mounted but unusable here; Auto chose {}",
            auto.backing()
        );
    }
    // Attaching finds the region wherever it is.
    let s = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    assert_eq!(s.backing(), auto.backing());
}

#[test]
fn exhaustion_and_cache_conservation() {
    let g = Names::new("exhaust");
    for cache in [0u32, 1, 8] {
        let _ = SharedPool::<u8>::remove(&g.name);
        let pool = SharedPool::<Obj>::create(
            &g.name,
            64,
            fp(),
            SharedOptions {
                cache_size: Some(cache),
                ..opts()
            },
        )
        .unwrap();
        let mut v = Vec::new();
        pool.get_bulk(&mut v, 64).unwrap();
        assert!(matches!(pool.get(), Err(PoolError::Exhausted { .. })));
        assert!(pool.get_bulk(&mut v, 1).is_err());
        assert_eq!(v.len(), 64);
        pool.put_bulk(&mut v);
        assert!(pool.cache_count() <= cache as usize);
        assert_eq!(pool.available(), 64);
        assert!(pool.get_bulk(&mut v, 65).is_err());
        assert!(v.is_empty(), "bulk is all or nothing");
        for _ in 0..200 {
            let k = pool.get_burst(&mut v, 13);
            assert_eq!(k, 13);
            pool.put_bulk(&mut v);
        }
        let audit = pool.audit();
        assert!(audit.is_consistent(), "cache {cache}: {audit}");
        pool.flush();
        assert_eq!(pool.ring_count(), 64);
    }
}

/// The shared pool runs the core's cache algorithm under every flush policy. The
/// region records the creator's policy (an attachment reads it); the cache never holds more
/// than the policy's fill limit; bulk and burst gets and bulk puts keep every object in exactly
/// one place, and fail only when the cache and the ring hold too few; gets and puts move whole
/// runs (a Classic miss refills `size + n - len` at once).
#[test]
fn every_policy_runs_the_core_cache_algorithm() {
    let g = Names::new("policies");
    let cap = 128u32;
    for policy in FlushPolicy::ALL {
        for cache in [0u32, 1, 2, 8, 32] {
            let _ = SharedPool::<u8>::remove(&g.name);
            let o = SharedOptions {
                cache_size: Some(cache),
                policy,
                ..opts()
            };
            let pool = SharedPool::<Obj>::create(&g.name, cap, fp(), o).unwrap();
            let other = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
            assert_eq!((pool.policy(), other.policy()), (policy, policy));
            let limit = policy.fill_limit(cache) as usize;
            let what = format!("{policy} cache {cache}");
            let (mut held, mut v) = (Vec::new(), Vec::new());
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ cache as u64);
            for _ in 0..1500 {
                let n = 1 + rng.below(40) as usize;
                let reachable = pool.cache_count() + pool.ring_count();
                match rng.below(3) {
                    0 => match pool.get_bulk(&mut v, n) {
                        Ok(()) => held.append(&mut v),
                        Err(PoolError::Exhausted { available, .. }) => {
                            assert!(reachable < n && available == reachable, "{what}");
                            assert!(v.is_empty(), "{what}");
                        }
                        Err(e) => panic!("{what}: {e}"),
                    },
                    1 => {
                        assert_eq!(pool.get_burst(&mut v, n), n.min(reachable), "{what}");
                        held.append(&mut v);
                    }
                    _ => {
                        let k = n.min(held.len());
                        v.extend(held.drain(held.len() - k..));
                        pool.put_bulk(&mut v);
                        assert!(v.is_empty());
                    }
                }
                assert!(
                    pool.cache_count() <= limit,
                    "{what}: {}",
                    pool.cache_count()
                );
                assert_eq!(
                    pool.cache_count() + pool.ring_count() + held.len(),
                    cap as usize,
                    "{what}"
                );
            }
            let mut idx: Vec<u32> = held.iter().map(|h| h.index()).collect();
            idx.sort_unstable();
            idx.dedup();
            assert_eq!(idx.len(), held.len(), "{what}: a handle twice");
            pool.put_bulk(&mut held);
            pool.flush();
            let a = pool.audit();
            assert!(
                a.is_consistent() && a.in_ring == cap as usize,
                "{what}: {a}"
            );
            assert_eq!(pool.corrupt_entries(), 0, "{what}");
        }
    }
    // Runs, as the core's caches: Classic, size 8, an empty cache asked for 3 refills
    // 8 + 3 - 0 = 11 at once and serves 3 from its top; a put crossing the threshold (12)
    // flushes the whole cache, then appends.
    let _ = SharedPool::<u8>::remove(&g.name);
    let o = SharedOptions {
        cache_size: Some(8),
        policy: FlushPolicy::Classic,
        ..opts()
    };
    let pool = SharedPool::<Obj>::create(&g.name, 64, fp(), o).unwrap();
    let mut v = Vec::new();
    pool.get_bulk(&mut v, 3).unwrap();
    assert_eq!((pool.cache_count(), pool.ring_count()), (8, 64 - 11));
    let mut more = Vec::new();
    pool.get_bulk(&mut more, 4).unwrap(); // hit: 4 from the top
    assert_eq!((pool.cache_count(), pool.ring_count()), (4, 64 - 11));
    v.append(&mut more);
    pool.put_bulk(&mut v); // 4 + 7 = 11 <= 12: appended
    assert_eq!((pool.cache_count(), pool.ring_count()), (11, 64 - 11));
    // Cross the threshold: 11 held, put 2 more (taken by a get that bypasses the cache).
    let ring_before = pool.ring_count();
    let mut big = Vec::new();
    pool.get_bulk(&mut big, 20).unwrap(); // 20 > size - 1: bypasses the cache
    assert_eq!(pool.cache_count(), 11);
    assert_eq!(pool.ring_count(), ring_before - 20);
    let mut two: Vec<_> = big.drain(..2).collect();
    pool.put_bulk(&mut two); // 11 + 2 > 12: the whole cache (11) to the ring, then the 2
    assert_eq!(pool.cache_count(), 2);
    assert_eq!(pool.ring_count(), ring_before - 20 + 11);
    pool.put_bulk(&mut big); // 18 > 12: bypasses the cache
    assert_eq!(pool.cache_count(), 2);
    assert_eq!(pool.ring_count(), ring_before - 20 + 11 + 18);
    assert!(pool.audit().is_consistent());
}

// ---- holes found by attack (regression tests) ----

/// Two regions of the same `T`, both handing out index 0 first. A handle of
/// `a` used with `b` must be refused, or `b.get_mut(&mut ha)` and `b.get_mut(&mut hb)` would be
/// two live `&mut T` to one object.
#[test]
fn handle_of_another_region_is_refused() {
    let ga = Names::new("foreign-a");
    let gb = Names::new("foreign-b");
    let o = SharedOptions {
        cache_size: Some(0),
        ..SharedOptions::default()
    };
    let a = SharedPool::<Obj>::create(&ga.name, 4, fp(), o.clone()).unwrap();
    let b = SharedPool::<Obj>::create(&gb.name, 4, fp(), o).unwrap();
    let mut ha = a.get().unwrap();
    let mut hb = b.get().unwrap();
    assert_eq!(ha.index(), hb.index(), "the attack needs equal indices");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let x = b.get_mut(&mut ha);
        let y = b.get_mut(&mut hb);
        x.value = 1;
        y.value = 2;
    }));
    assert!(r.is_err(), "a handle of region a was accepted by region b");
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.get_ref(&ha).value));
    assert!(r.is_err());
    // Two attachments of one region in one process: the same refusal.
    let a2 = SharedPool::<Obj>::attach(&ga.name, fp()).unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a2.get_ref(&ha).value));
    assert!(r.is_err());
    a.put(ha);
    b.put(hb);
    assert_eq!(a.available(), 4);
    assert_eq!(b.available(), 4);
}

/// A handle that outlived its attachment, whose object
/// `reclaim_in_use_of_dead` returned and another `get` handed out again, is refused.
#[test]
fn stale_handle_after_reclaim_in_use_is_refused() {
    let g = Names::new("stale");
    let o = SharedOptions {
        cache_size: Some(0),
        ..SharedOptions::default()
    };
    let primary = SharedPool::<Obj>::create(&g.name, 1, fp(), o).unwrap();
    let a = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    let mut old = a.get().unwrap();
    drop(a);
    assert_eq!(primary.reclaim_in_use_of_dead(), 1);
    let mut new = primary.get().unwrap();
    assert_eq!(new.index(), old.index());
    primary.get_mut(&mut new).value = 5;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        primary.get_mut(&mut old).value = 6;
    }));
    assert!(r.is_err(), "a stale handle reached a re-issued object");
    assert_eq!(primary.get_ref(&new).value, 5);
    // Putting the stale handle is refused too (the object stays with `new`).
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| primary.put(old)));
    assert!(r.is_err());
    primary.put(new);
    assert!(primary.audit().is_consistent());
}

/// An impossible bulk get is `Exhausted` at once (no allocation, no
/// panic), and `available` never exceeds the capacity.
#[test]
fn impossible_bulk_gets_are_exhausted_with_true_counts() {
    let g = Names::new("bulkerr");
    for cache in [0u32, 4, 8] {
        let _ = SharedPool::<u8>::remove(&g.name);
        let pool = SharedPool::<Obj>::create(
            &g.name,
            8,
            fp(),
            SharedOptions {
                cache_size: Some(cache),
                ..opts()
            },
        )
        .unwrap();
        let mut v = Vec::new();
        match pool.get_bulk(&mut v, usize::MAX) {
            Err(PoolError::Exhausted {
                requested,
                available,
            }) => assert_eq!((requested, available), (usize::MAX, 8)),
            other => panic!("cache {cache}: {other:?}"),
        }
        assert_eq!(v.capacity(), 0, "nothing allocated");
        match pool.get_bulk(&mut v, 9) {
            Err(PoolError::Exhausted {
                requested,
                available,
            }) => assert_eq!((requested, available), (9, 8), "cache {cache}"),
            other => panic!("cache {cache}: {other:?}"),
        }
        assert!(v.is_empty());
        pool.get_bulk(&mut v, 3).unwrap();
        match pool.get_bulk(&mut v, 6) {
            Err(PoolError::Exhausted {
                requested,
                available,
            }) => assert_eq!((requested, available), (6, 5), "cache {cache}"),
            other => panic!("cache {cache}: {other:?}"),
        }
        assert_eq!(v.len(), 3);
        assert_eq!(pool.get_burst(&mut v, usize::MAX), 5);
        pool.put_bulk(&mut v);
        assert!(pool.audit().is_consistent());
    }
}

/// The default cache size never makes a small pool invalid; a size the user
/// set is still checked.
#[test]
fn default_cache_size_fits_small_pools() {
    let g = Names::new("smalldefault");
    for cap in [1u32, 2, 8, 31, 32, 33] {
        let _ = SharedPool::<u8>::remove(&g.name);
        let pool = SharedPool::<Obj>::create(&g.name, cap, fp(), SharedOptions::default())
            .unwrap_or_else(|e| panic!("capacity {cap}: {e}"));
        assert_eq!(pool.cache_size(), cap.min(32));
        let mut v = Vec::new();
        pool.get_bulk(&mut v, cap as usize).unwrap();
        pool.put_bulk(&mut v);
        drop(pool);
    }
    let _ = SharedPool::<u8>::remove(&g.name);
    let r = SharedPool::<Obj>::create(
        &g.name,
        8,
        fp(),
        SharedOptions {
            cache_size: Some(32),
            ..SharedOptions::default()
        },
    );
    assert!(matches!(r, Err(PoolError::InvalidConfig { .. })), "{r:?}");
}

// ---- kill -9 at any instruction ----

/// SIGKILLs a secondary again and again while a survivor in this process keeps
/// working on the same rings: at random moments (random delays), and deterministically at each
/// step of each ring operation (lock taken, record prepared, half applied, applied, record
/// idle; for each of: cache flush, cache refill, cache-less put, cache-less get, send,
/// receive), inside a cache pop and a cache push (of one object, and between the first and
/// the others of a run), and inside `reclaim_dead` (after a planted dead slot), each
/// at a random hit count, under every flush policy. After each kill: the survivor must finish
/// (never wait forever on the dead process's ring lock), and after `reclaim_in_use_of_dead`
/// both pools' audits must be clean with every object in exactly one place: nothing lost (no
/// `repair_lost`), nothing duplicated, no corrupt entry. 36 cases x 3 policies; 1,080 kills
/// in a release build (each case 10 times per policy; `IDXPOOL_KILLS` overrides), 36 in a
/// debug build (each case under one policy, in turn).
#[test]
fn kill9_at_any_point_never_wedges_or_loses() {
    use idxpool::shared::{kill_point as kp, op_code};
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc};

    // (point, op): 0 = a random moment; ring points x ring operations; cache and reclaim.
    let mut cases = vec![(0u32, 0u32)];
    for (kind, chan) in [
        (1, false),
        (2, false),
        (3, false),
        (4, false),
        (3, true),
        (4, true),
    ] {
        for point in kp::LOCKED..=kp::UNLOCKING {
            cases.push((point, op_code(kind, chan)));
        }
    }
    cases.extend([
        (kp::CACHE_POP, 0),
        (kp::CACHE_PUSH, 0),
        (kp::CACHE_POP_RUN, 0),
        (kp::CACHE_PUSH_RUN, 0),
        (kp::RECLAIM, 0),
    ]);
    let kills: u32 = std::env::var("IDXPOOL_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 1 } else { 30 } * cases.len() as u32);
    let cap = 96u32;
    let o = SharedOptions {
        channels: 2,
        max_processes: 6,
        ..SharedOptions::default()
    };
    // One pool pair (cached, cache-less) per flush policy (the shared pool runs the
    // core's cache algorithm under every policy).
    let sets: Vec<_> = FlushPolicy::ALL
        .into_iter()
        .map(|policy| {
            let g = Names::new(&format!("kill9any-{}", policy.name()));
            let gf = Names {
                name: format!("{}-flat", g.name),
                extra: Vec::new(),
            };
            let o = SharedOptions {
                policy,
                ..o.clone()
            };
            let pool = SharedPool::<Obj>::create(
                &g.name,
                cap,
                fp(),
                SharedOptions {
                    cache_size: Some(8),
                    ..o.clone()
                },
            )
            .unwrap();
            let flat = SharedPool::<Obj>::create(
                &gf.name,
                cap,
                fp(),
                SharedOptions {
                    cache_size: Some(0),
                    ..o
                },
            )
            .unwrap();
            assert_eq!(pool.policy(), policy);
            (g, gf, pool, flat)
        })
        .collect();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ std::process::id() as u64);
    let mut by_case = vec![0u32; cases.len()];
    let mut by_policy = [0u32; 3];
    for k in 0..kills {
        let case = k as usize % cases.len();
        let (point, op) = cases[case];
        // Every case meets every policy in turn (release), each case one policy (debug).
        let set = (k as usize + k as usize / cases.len()) % sets.len();
        let (g, _, pool, flat) = &sets[set];
        by_policy[set] += 1;
        if point == kp::RECLAIM {
            // A dead slot for the victim to reclaim (and be killed inside of).
            let mut c = ChildGuard::spawn("hold", &[(NAME, g.name.clone())]);
            assert!(c.line().starts_with("READY"));
            c.child.kill().unwrap();
            c.child.wait().unwrap();
        }
        // The survivor: other attachments in this process, working until told to stop.
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel();
        let survivor = {
            let (stop, name, seed) = (stop.clone(), g.name.clone(), rng.next());
            std::thread::spawn(move || {
                let p = SharedPool::<Obj>::attach(&name, fp()).unwrap();
                let f = SharedPool::<Obj>::attach(&format!("{name}-flat"), fp()).unwrap();
                // No reclaim here: the victim of the reclaim point must find the dead slot.
                pool_workload(&p, &f, &mut Rng(seed | 1), false, &|| {
                    stop.load(Ordering::Relaxed)
                });
                drop((p, f));
                let _ = done_tx.send(());
            })
        };
        // The reclaim point is passed once per dead slot: there is one.
        let nth = if point == kp::RECLAIM {
            1
        } else {
            1 + rng.below(12) as u32
        };
        let mut c = ChildGuard::spawn(
            "victim",
            &[
                (NAME, g.name.clone()),
                ("IDXPOOL_MP_POINT", point.to_string()),
                ("IDXPOOL_MP_OP", op.to_string()),
                ("IDXPOOL_MP_NTH", nth.to_string()),
            ],
        );
        assert_eq!(c.line(), "READY");
        if point == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
            c.child.kill().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let st = loop {
            if let Some(st) = c.child.try_wait().unwrap() {
                break st;
            }
            assert!(
                Instant::now() < deadline,
                "kill {k}: point {point} op {op} not reached"
            );
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(st.signal(), Some(libc::SIGKILL), "kill {k}: victim {st}");
        by_case[case] += 1;
        stop.store(true, Ordering::Relaxed);
        done_rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!(
                    "kill {k} (point {point} op {op}): the survivor did not finish: {} / {}",
                    pool.audit(),
                    flat.audit()
                )
            });
        survivor.join().unwrap();
        for (p, chans) in [(pool, 2), (flat, 2)] {
            p.reclaim_in_use_of_dead();
            for c in 0..chans {
                p.reset_channel(c);
            }
            p.flush();
            let a = p.audit();
            let what = format!(
                "kill {k} (policy {}, point {point}, op {op}, nth {nth}): {a}",
                p.policy()
            );
            assert!(a.is_consistent() && a.in_ring == cap as usize, "{what}");
            assert_eq!(p.available(), cap as usize, "{what}");
            assert_eq!(p.corrupt_entries(), 0, "{what}");
            assert_eq!(p.processes().len(), 1, "{what}: {:?}", p.processes());
            // Every object exactly once in the ring: take them all, check the indices.
            let mut all = Vec::new();
            p.get_bulk(&mut all, cap as usize).unwrap();
            let mut idx: Vec<u32> = all.iter().map(|h| h.index()).collect();
            idx.sort_unstable();
            assert_eq!(idx, (0..cap).collect::<Vec<_>>(), "{what}");
            p.put_bulk(&mut all);
            p.flush();
        }
    }
    println!(
        "kills per case {:?}: {by_case:?}; per policy {by_policy:?}",
        cases
    );
    assert_eq!(by_case.iter().sum::<u32>(), kills);
}

/// A peer that truncates the region (or re-creates its file with `O_TRUNC`, or
/// replaces the name) cannot crash the processes attached to it: the region is a sealed memfd,
/// so both attempts fail with `EPERM`, and the others go on working on their mappings.
#[test]
fn truncation_by_a_peer_cannot_crash_the_others() {
    let g = Names::new("truncate");
    let o = SharedOptions {
        backing: SharedBackingPolicy::Require(SharedBacking::Shm),
        ..opts()
    };
    let pool = SharedPool::<Obj>::create(&g.name, 64, fp(), o).unwrap();
    assert!(pool.is_sealed());
    let other = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    assert!(other.is_sealed());
    let mut held = Vec::new();
    pool.get_bulk(&mut held, 40).unwrap();
    for (i, h) in held.iter_mut().enumerate() {
        pool.get_mut(h).value = 1000 + i as u64;
    }
    let mut c = ChildGuard::spawn("truncate", &[(NAME, g.name.clone())]);
    let l = c.line();
    c.wait_success();
    assert_eq!(
        l, "TRUNC Err(PermissionDenied) Err(PermissionDenied)",
        "the peer could shrink the region"
    );
    // Every page of the region is still there: touch all objects and every ring.
    for (i, h) in held.iter_mut().enumerate() {
        assert_eq!(pool.get_ref(h).value, 1000 + i as u64);
    }
    pool.send_bulk(0, &mut held);
    let mut got = Vec::new();
    assert_eq!(other.recv_burst(0, &mut got, 64), 40);
    other.put_bulk(&mut got);
    other.flush();
    let mut all = Vec::new();
    pool.get_bulk(&mut all, 64).unwrap();
    for h in all.iter_mut() {
        pool.get_mut(h).seq = 7;
    }
    pool.put_bulk(&mut all);
    assert!(pool.audit().is_consistent());
    // The name now belongs to the peer's file: new attaches get a typed error, not a crash.
    assert!(SharedPool::<Obj>::attach(&g.name, fp()).is_err());
}

/// Liveness across pid namespaces. A secondary in its own pid namespace (pid 1
/// there, and `/proc` still the host's, so its recorded pid + start time name the *host's*
/// init, which never dies) is killed; the survivor must still see it dead (its slot's
/// `F_OFD_SETLK` lock is gone) and reclaim its slot, cache and held objects.
#[test]
fn death_in_another_pid_namespace_is_seen() {
    // SAFETY: plain syscall.
    if unsafe { libc::geteuid() } != 0 {
        println!("skipped: unshare --pid needs root");
        return;
    }
    let g = Names::new("pidns");
    let pool = SharedPool::<Obj>::create(&g.name, 64, fp(), opts()).unwrap();
    let mut cmd = Command::new("unshare");
    cmd.args(["--pid", "--fork"])
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env(ROLE, "holdexit")
        .env(NAME, &g.name)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let Ok(mut child) = cmd.spawn() else {
        println!("skipped: no unshare(1)");
        return;
    };
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("MP:") {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let st = child.wait().unwrap();
            println!("skipped: unshare --pid failed here ({st})");
            return;
        }
    }
    assert!(line.contains("MP:READY pid 1 "), "{line}");
    let st = child.wait().unwrap();
    assert_eq!(st.code(), Some(9), "{st}");
    let victim = pool
        .processes()
        .into_iter()
        .find(|p| !p.is_self)
        .expect("the victim's slot");
    assert_eq!(victim.process.pid, 1, "its pid as seen in its namespace");
    assert!(
        !victim.alive,
        "the victim is dead, whatever its pid names here"
    );
    let rep = pool.reclaim_dead();
    assert_eq!(rep.slots_freed, 1, "{rep}");
    assert_eq!(pool.reclaim_in_use_of_dead(), 3);
    pool.flush();
    assert!(pool.audit().is_consistent());
    assert_eq!(pool.available(), 64);
}

// ---- the creator's death, liveness of the caller, names ----

/// The kind and message of a `SharedFile` error.
fn file_msg<T>(r: Result<T, PoolError>) -> (std::io::ErrorKind, String) {
    match r {
        Err(PoolError::SharedFile { source, .. }) => (source.kind(), source.to_string()),
        Err(e) => panic!("not a SharedFile error: {e}"),
        Ok(_) => panic!("succeeded"),
    }
}

/// The creator of a (sealed, default) pool is SIGKILLed, at a random moment
/// or at an armed kill point inside a ring operation, a cache pop or push, while this process
/// stays attached and works on the same rings. Then a process that starts *after* the creator
/// died must attach, recover the creator's objects and find every object accounted for. While
/// this process is attached, `create` of the name is refused (the region lives); once no process
/// of the region lives, `create` replaces the stale name and says so (`replaced_stale`).
#[test]
fn new_process_joins_after_the_creator_is_killed() {
    use idxpool::shared::{kill_point as kp, op_code};
    use std::os::unix::process::ExitStatusExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let mut cases = vec![(0u32, 0u32), (0, 0), (0, 0)];
    for (kind, chan) in [(1, false), (2, false), (3, false), (4, true)] {
        for point in [kp::LOCKED, kp::PREPARED, kp::MID_APPLY, kp::APPLIED] {
            cases.push((point, op_code(kind, chan)));
        }
    }
    cases.extend([(kp::CACHE_POP_RUN, 0), (kp::CACHE_PUSH_RUN, 0)]);
    let g = Names::new("creatorkill");
    let gf = Names {
        name: format!("{}-flat", g.name),
        extra: Vec::new(),
    };
    let mut rng = Rng(0x1234_5678_9abc_def1 ^ std::process::id() as u64);
    for (round, &(point, op)) in cases.iter().enumerate() {
        let nth = 1 + rng.below(12) as u32;
        let what = format!("round {round}: point {point} op {op} nth {nth}");
        let mut creator = ChildGuard::spawn(
            "creator",
            &[
                (NAME, g.name.clone()),
                ("IDXPOOL_MP_POINT", point.to_string()),
                ("IDXPOOL_MP_OP", op.to_string()),
                ("IDXPOOL_MP_NTH", nth.to_string()),
            ],
        );
        // The names of the previous round are stale (all its processes gone): replaced.
        let stale = round > 0;
        assert_eq!(
            creator.line(),
            format!("READY replaced {stale} {stale}"),
            "{what}"
        );
        let keep =
            SharedPool::<Obj>::attach(&g.name, fp()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let keep_flat =
            SharedPool::<Obj>::attach(&gf.name, fp()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let survivor = {
            let (stop, seed) = (stop.clone(), rng.next());
            let p = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
            let f = SharedPool::<Obj>::attach(&gf.name, fp()).unwrap();
            std::thread::spawn(move || {
                pool_workload(&p, &f, &mut Rng(seed | 1), false, &|| {
                    stop.load(Ordering::Relaxed)
                });
            })
        };
        if point == 0 {
            std::thread::sleep(Duration::from_micros(rng.below(3000)));
            creator.child.kill().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        let st = loop {
            if let Some(st) = creator.child.try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "{what}: kill point not reached");
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(st.signal(), Some(libc::SIGKILL), "{what}: creator {st}");
        stop.store(true, Ordering::Relaxed);
        survivor.join().unwrap();
        assert!(
            !keep
                .processes()
                .iter()
                .any(|p| p.process == keep.creator() && p.alive),
            "{what}: the creator is dead"
        );

        // A process that starts now joins, recovers and accounts for every object.
        let mut joiner = ChildGuard::spawn("joiner", &[(NAME, g.name.clone())]);
        assert!(joiner.line().starts_with("JOINED"), "{what}");
        joiner.wait_success();
        for p in [&keep, &keep_flat] {
            let a = p.audit();
            assert!(
                a.is_consistent() && a.in_ring == JOIN_CAP as usize,
                "{what}: {a}"
            );
        }
        // This process still lives in the region: its name is not stale.
        let (kind, msg) = file_msg(SharedPool::<Obj>::create(&g.name, 8, fp(), opts()));
        assert_eq!(kind, std::io::ErrorKind::AlreadyExists, "{what}");
        assert!(msg.contains("still attached"), "{what}: {msg}");
        drop((keep, keep_flat));
    }
    // Nobody is left: the name is stale, and create says it replaced it.
    let fresh = SharedPool::<Obj>::create(&g.name, 8, fp(), opts()).unwrap();
    assert!(fresh.replaced_stale());
    let other = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    assert_eq!(other.capacity(), 8);
    // A name nobody replaced says so too.
    let g2 = Names::new("notstale");
    assert!(!SharedPool::<Obj>::create(&g2.name, 8, fp(), opts())
        .unwrap()
        .replaced_stale());
    // No member link is left behind once the names are removed.
    drop((fresh, other));
    drop((g, gf, g2));
    let left: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|f| f.contains(&format!("idxpool-test-{}-creatorkill", std::process::id())))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `processes()` reports the caller's own slot alive (it probed the slot's
/// lock on the caller's own open file description, which holds it, and saw it free), the same
/// as another attachment sees it.
#[test]
fn processes_reports_the_caller_alive() {
    let g = Names::new("selfalive");
    let pool = SharedPool::<Obj>::create(&g.name, 16, fp(), opts()).unwrap();
    let other = SharedPool::<Obj>::attach(&g.name, fp()).unwrap();
    for (me, them) in [(&pool, &other), (&other, &pool)] {
        let own = me.processes();
        let seen = them.processes();
        let mine = own.iter().find(|p| p.is_self).expect("own slot");
        assert_eq!(mine.slot, me.slot());
        assert!(mine.alive, "the caller reports itself dead: {own:?}");
        let theirs = seen.iter().find(|p| p.slot == me.slot()).unwrap();
        assert!(theirs.alive && !theirs.is_self);
        assert_eq!(own.iter().filter(|p| p.alive).count(), 2, "{own:?}");
    }
    // Reclaiming skips every live slot, the caller's included.
    assert_eq!(pool.reclaim_dead().slots_freed, 0);
    assert_eq!(pool.processes().len(), 2);
}

/// One name length limit (`MAX_NAME_LEN` bytes; of an absolute path, the
/// last component), the same for a sealed region and a regular file, checked up front with
/// a typed error naming the numbers, by create, attach and remove alike.
#[test]
fn pool_names_have_one_length_limit() {
    use idxpool::shared::{MAX_NAME_LEN, MAX_PATH_LEN};
    let prefix = format!("idxpool-test-{}-len", std::process::id());
    let named = |n: usize| format!("{prefix}{}", "x".repeat(n - prefix.len()));
    let too_long = |r: Result<SharedPool<Obj>, PoolError>, len: usize| match r {
        Err(PoolError::InvalidConfig { reason: m }) => {
            assert!(m.contains(&format!("{len} bytes")), "{m}");
            assert!(m.contains(&format!("at most {MAX_NAME_LEN} bytes")), "{m}");
        }
        Err(e) => panic!("not InvalidConfig: {e}"),
        Ok(_) => panic!("a name of {len} bytes was accepted"),
    };
    // Sealed memfd (default), regular file for other users, regular file kept on drop.
    for (mode, o) in [
        ("sealed", opts()),
        (
            "file 0644",
            SharedOptions {
                mode: 0o644,
                ..opts()
            },
        ),
        (
            "file kept",
            SharedOptions {
                unlink_on_drop: false,
                ..opts()
            },
        ),
    ] {
        let name = named(MAX_NAME_LEN);
        let _g = Names {
            name: name.clone(),
            extra: Vec::new(),
        };
        let p = SharedPool::<Obj>::create(&name, 8, fp(), o.clone())
            .unwrap_or_else(|e| panic!("{mode}: the longest name: {e}"));
        assert_eq!(p.is_sealed(), mode == "sealed");
        let a = SharedPool::<Obj>::attach(&name, fp()).unwrap();
        drop((a, p));
        let long = named(MAX_NAME_LEN + 1);
        too_long(
            SharedPool::<Obj>::create(&long, 8, fp(), o.clone()),
            MAX_NAME_LEN + 1,
        );
        too_long(SharedPool::<Obj>::attach(&long, fp()), MAX_NAME_LEN + 1);
        let abs = format!("/dev/shm/{}", named(MAX_NAME_LEN + 40));
        too_long(
            SharedPool::<Obj>::create(&abs, 8, fp(), o),
            MAX_NAME_LEN + 40,
        );
    }
    assert!(matches!(
        SharedPool::<Obj>::remove(&named(MAX_NAME_LEN + 1)),
        Err(PoolError::InvalidConfig { .. })
    ));
    // An absolute path: its last component counts, and the whole path has a limit too.
    let deep = format!("/{}/p", "d/".repeat(MAX_PATH_LEN / 2));
    match SharedPool::<Obj>::attach(&deep, fp()) {
        Err(PoolError::InvalidConfig { reason: m }) => {
            assert!(m.contains(&format!("{MAX_PATH_LEN}")), "{m}")
        }
        other => panic!("{other:?}"),
    }
}
