//! [`XdpSocket`]: an AF_XDP socket whose UMEM is a pool's region (feature `xdp`).

use std::ffi::CString;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use crate::element::Element;
use crate::error::{DescriptorFault, PoolError};
use crate::handle::Handle;
use crate::local::LocalCache;
use crate::owned::PoolRef;
use crate::packet::PacketBuf;
use crate::pool::Pool;
use crate::repr::ReprImpl;
use crate::xdp::config::{
    check_layout, kernel, Frame, KernelXdpStats, XdpConfig, XdpMode, XdpStats,
};
use crate::xdp::ledger::{FrameLedger, LentTo};
use crate::xdp::rx_object::sealed::Checked;
use crate::xdp::sys::{self, RawRing, XdpDesc};
use crate::xdp::{FrameMap, RxObject};

type H<P> = Handle<<P as PoolRef>::T, <P as PoolRef>::B, <P as PoolRef>::R>;

/// An AF_XDP socket whose UMEM is the pool's region (see the [module docs](crate::xdp)), set up
/// through libxdp's `xsk.h`, as DPDK's af_xdp PMD makes its mbuf pool the UMEM.
///
/// `P` holds the pool (`Arc<Pool>`, `&'static Pool`): `'static` because the kernel writes the
/// region while the socket is open, and `mem::forget` (safe) never closes it. The object type
/// is an [`RxObject`] filling its frame exactly (object size == stride): a `Pod`, or a
/// [`crate::PacketBuf`] (`packet_bufs(n, 2032, h)`, `StrideMode::Natural`: 2048-byte frames)
/// whose header is frame headroom, set from each RX descriptor and read by
/// [`XdpSocket::transmit_bufs`]. Not `Send`: make it on the thread that uses it.
///
/// ```no_run
/// use std::sync::Arc;
/// use idxpool::xdp::{XdpConfig, XdpSocket};
/// use idxpool::{PoolBuilder, StrideMode};
///
/// // 2 KiB frames: the aligned chunk mode wants a power-of-two stride.
/// let pool = PoolBuilder::<[u8; 2048]>::zeroed(4096).stride(StrideMode::Natural).build()?;
/// let pool = Arc::new(pool);
/// let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new("xdp0"))?;
/// let mut frames = Vec::with_capacity(64);
/// xsk.poll(&mut frames, Some(std::time::Duration::from_millis(10)))?;
/// for f in frames.drain(..) {
///     println!("{} bytes: {:02x?}", f.len, &xsk.bytes(&f)[..14.min(f.len as usize)]);
///     pool.put(f.handle); // back to the pool; the fill ring gets it at a later refill
/// }
/// # Ok::<(), idxpool::PoolError>(())
/// ```
pub struct XdpSocket<P: PoolRef + Clone + 'static>
where
    P::T: RxObject,
{
    // Dropped after `Drop::drop` closed all: ring structs (libxdp reads them while closing),
    // cache, ledger (and pool).
    xsk: *mut sys::XskSocket,
    umem: *mut sys::XskUmem,
    fd: RawFd,
    fill: Box<RawRing>,
    comp: Box<RawRing>,
    rx: Box<RawRing>,
    tx: Box<RawRing>,
    scratch: Vec<H<P>>,
    parked: Vec<H<P>>,
    cache: Option<LocalCache<P>>,
    lend_target: u32,
    burst: u32,
    recycle_tx: bool,
    object_size: u64,
    stats: XdpStats,
    ledger: FrameLedger<P>,
}

impl<P: PoolRef + Clone + 'static> XdpSocket<P>
where
    P::T: RxObject,
{
    /// Registers the pool's region as a UMEM (frames of the stride, unaligned chunks unless a
    /// power of two), opens an AF_XDP socket bound to `cfg.ifname` queue `cfg.queue`, and
    /// (`cfg.load_program`) has libxdp attach its redirect program. Nothing is lent until the
    /// first [`XdpSocket::poll`] (or [`XdpSocket::refill`]).
    ///
    /// # Errors
    /// [`PoolError::Umem`] when the region cannot be the UMEM ([`crate::error::UmemFault`]:
    /// frame size not the stride, object smaller than its frame, stride outside
    /// 2048..=page size, base not page aligned, headroom, ring sizes);
    /// [`PoolError::InvalidConfig`] for neither RX nor TX, or a NUL in the interface name;
    /// [`PoolError::Kernel`] when libxdp or the kernel refuses (`EPERM` without CAP_NET_ADMIN,
    /// `ENODEV`, an XDP program already attached, ...).
    pub fn new(pool: P, cfg: &XdpConfig) -> Result<Self, PoolError> {
        let p = pool.pool();
        let map = check_layout(p, cfg)?;
        if !cfg.rx && !cfg.tx {
            return Err(PoolError::config("xdp socket: neither rx nor tx"));
        }
        let ifname = CString::new(cfg.ifname.as_str())
            .map_err(|_| PoolError::config("xdp socket: interface name holds a NUL"))?;
        let ledger = FrameLedger::new(pool.clone())?;
        let stride = p.stride();
        let burst = cfg.burst.clamp(1, cfg.fill_size.max(1));
        let lend_target = match cfg.lend {
            0 => (p.capacity() / 4 * 3).max(1).min(cfg.fill_size),
            n => n.min(cfg.fill_size).min(p.capacity()),
        };
        let mut scratch = Vec::new();
        scratch
            .try_reserve_exact(burst as usize)
            .map_err(|_| PoolError::overflow("xdp burst"))?;
        let (mut fill, mut comp, mut rx, mut tx) = (
            RawRing::empty(),
            RawRing::empty(),
            RawRing::empty(),
            RawRing::empty(),
        );
        let ucfg = sys::UmemConfig {
            fill_size: cfg.fill_size,
            comp_size: cfg.comp_size,
            frame_size: stride as u32,
            // The object's header (a `PacketBuf`'s) is never the kernel's.
            frame_headroom: cfg.frame_headroom + <P::T as RxObject>::FRONT,
            flags: if map.aligned() {
                0
            } else {
                sys::UMEM_UNALIGNED_CHUNK_FLAG
            },
        };
        let mut umem = std::ptr::null_mut();
        // SAFETY: the pool's region (`capacity x stride` bytes), mapped while `pool` (the
        // ledger's, 'static) lives, which outlives the UMEM (closed in Drop first; never when
        // leaked). The kernel writes only frames lent to the fill ring (handles given up to the
        // ledger). libxdp points at the boxed ring structs until Drop deletes socket and UMEM.
        let rc = unsafe {
            sys::xsk_umem__create(
                &mut umem,
                p.base().as_ptr().cast(),
                u64::from(p.capacity()) * stride as u64,
                &mut *fill,
                &mut *comp,
                &ucfg,
            )
        };
        if rc != 0 || umem.is_null() {
            return Err(kernel("xsk_umem__create", rc));
        }
        let scfg = sys::SocketConfig {
            rx_size: if cfg.rx { cfg.rx_size } else { 0 },
            tx_size: if cfg.tx { cfg.tx_size } else { 0 },
            libxdp_flags: if cfg.load_program {
                0
            } else {
                sys::INHIBIT_PROG_LOAD
            },
            xdp_flags: match cfg.mode {
                XdpMode::Auto => 0,
                XdpMode::Skb => sys::XDP_FLAGS_SKB_MODE,
                XdpMode::Drv => sys::XDP_FLAGS_DRV_MODE,
            },
            bind_flags: sys::XDP_USE_NEED_WAKEUP | if cfg.force_copy { sys::XDP_COPY } else { 0 },
        };
        let mut xsk = std::ptr::null_mut();
        let rx_ptr: *mut RawRing = if cfg.rx {
            &mut *rx
        } else {
            std::ptr::null_mut()
        };
        let tx_ptr: *mut RawRing = if cfg.tx {
            &mut *tx
        } else {
            std::ptr::null_mut()
        };
        // A socket just closed keeps the queue busy until the kernel's deferred release: retry
        // `EBUSY` for up to a second.
        let t0 = std::time::Instant::now();
        let rc = loop {
            // SAFETY: a live `umem`; a NUL-terminated name; boxed rings that outlive the socket.
            let rc = unsafe {
                sys::xsk_socket__create(
                    &mut xsk,
                    ifname.as_ptr(),
                    cfg.queue,
                    umem,
                    rx_ptr,
                    tx_ptr,
                    &scfg,
                )
            };
            if rc != -libc::EBUSY || t0.elapsed() > Duration::from_secs(1) {
                break rc;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if rc != 0 || xsk.is_null() {
            // SAFETY: no socket uses the UMEM; nothing was lent.
            unsafe { sys::xsk_umem__delete(umem) };
            return Err(kernel("xsk_socket__create", rc));
        }
        // SAFETY: a live socket.
        let fd = unsafe { sys::xsk_socket__fd(xsk) };
        let object_size = p.object_size() as u64;
        Ok(XdpSocket {
            xsk,
            umem,
            fd,
            fill,
            comp,
            rx,
            tx,
            scratch,
            parked: Vec::new(),
            cache: Some(LocalCache::new(pool)),
            lend_target,
            burst,
            recycle_tx: cfg.recycle_tx,
            object_size,
            stats: XdpStats::default(),
            ledger,
        })
    }

    /// The pool.
    pub fn pool(&self) -> &Pool<P::T, P::B, P::R> {
        self.ledger.pool().pool()
    }

    /// The pool as held (`&Arc<Pool>` or `&&'static Pool`), e.g. to clone the `Arc`.
    pub fn pool_ref(&self) -> &P {
        self.ledger.pool()
    }

    /// The socket's file descriptor (for `poll`/`epoll`; do not close it).
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// The frame map (pool index <-> UMEM offset) in use.
    pub fn frame_map(&self) -> FrameMap {
        self.ledger.map()
    }

    /// Frames lent now on `ring` (fill + RX unread; TX + completions unreaped).
    pub fn lent(&self, ring: LentTo) -> u32 {
        self.ledger.lent(ring)
    }

    /// The counters since creation.
    pub fn stats(&self) -> XdpStats {
        self.stats
    }

    /// The kernel's counters of this socket (`getsockopt(SOL_XDP, XDP_STATISTICS)`).
    ///
    /// # Errors
    /// [`PoolError::Kernel`] when the kernel refuses the option.
    pub fn kernel_stats(&self) -> Result<KernelXdpStats, PoolError> {
        let mut s = KernelXdpStats::default();
        let mut len = std::mem::size_of::<KernelXdpStats>() as libc::socklen_t;
        // SAFETY: repr(C) six u64, `struct xdp_statistics` (5.9+; older: 3 and a shorter `len`).
        let rc = unsafe {
            libc::getsockopt(
                self.fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut s as *mut KernelXdpStats).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(PoolError::Kernel {
                op: "getsockopt XDP_STATISTICS",
                source: io::Error::last_os_error(),
            });
        }
        Ok(s)
    }

    /// A frame's received bytes (empty if its public offset and length do not fit the object);
    /// for a [`crate::PacketBuf`], its data until the application changes its header.
    ///
    /// # Panics
    /// Run-time pools: when the frame's handle is another pool's ([`XdpSocket::try_bytes`]
    /// returns an error instead).
    #[inline]
    pub fn bytes<'a>(&'a self, f: &'a Frame<P::T, P::B, P::R>) -> &'a [u8] {
        let ptr = self.pool().as_ptr(&f.handle).cast::<u8>();
        // SAFETY: the handle is the pool's (as_ptr checks run-time pools) and owned by `f`,
        // borrowed shared for 'a (no `&mut` meanwhile); `object_size` bytes, all initialised
        // (a Pod, or a PacketBuf: header written at build, room zero-filled or by the kernel).
        let obj = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), self.object_size as usize) };
        let start = f.offset as usize;
        obj.get(start..start.saturating_add(f.len as usize))
            .unwrap_or(&[])
    }

    /// [`XdpSocket::bytes`], with an error instead of a panic for another pool's handle.
    ///
    /// # Errors
    /// [`PoolError::ForeignHandle`].
    pub fn try_bytes<'a>(&'a self, f: &'a Frame<P::T, P::B, P::R>) -> Result<&'a [u8], PoolError> {
        self.pool().check(&f.handle)?;
        Ok(self.bytes(f))
    }

    /// An object for a frame to transmit, from the socket's cache (where TX completions go).
    ///
    /// # Errors
    /// [`PoolError::Exhausted`] when the cache and the common ring are empty (frames may be
    /// in flight: [`XdpSocket::complete`] brings them back).
    #[inline]
    pub fn get(&mut self) -> Result<H<P>, PoolError> {
        match self.cache.as_mut() {
            Some(c) => c.get(),
            None => self.ledger.pool().pool().get(),
        }
    }

    /// Up to `n` objects from the socket's cache, appended to `out`; returns how many.
    pub fn get_burst(&mut self, out: &mut Vec<H<P>>, n: usize) -> usize {
        match self.cache.as_mut() {
            Some(c) => c.get_burst(out, n),
            None => self.ledger.pool().pool().get_burst(out, n),
        }
    }

    /// Gives an object back through the socket's cache, where [`XdpSocket::refill`] finds it
    /// first (a pool `put` goes to the thread's cache, reached only via the common ring).
    #[inline]
    pub fn put(&mut self, h: H<P>) {
        match self.cache.as_mut() {
            Some(c) => c.put(h),
            None => self.ledger.pool().pool().put(h),
        }
    }

    /// [`XdpSocket::put`] of every frame of `frames` (drained), in one bulk put.
    pub fn put_frames(&mut self, frames: &mut Vec<Frame<P::T, P::B, P::R>>) {
        self.scratch.clear();
        self.scratch.extend(frames.drain(..).map(|f| f.handle));
        match self.cache.as_mut() {
            Some(c) => c.put_bulk(&mut self.scratch),
            None => self.ledger.pool().pool().put_bulk(&mut self.scratch),
        }
    }

    /// Lends frames to the fill ring up to the lend target: up to a burst from the cache, one
    /// entry each, one producer store. Returns how many. [`XdpSocket::poll`] calls it first.
    pub fn refill(&mut self) -> u32 {
        if !self.fill.is_mapped() || !self.rx.is_mapped() {
            return 0;
        }
        let want = self
            .lend_target
            .saturating_sub(self.ledger.lent(LentTo::Fill))
            .min(self.burst);
        if want == 0 {
            return 0;
        }
        let (idx, room) = self.fill.reserve(want);
        if room == 0 {
            return 0;
        }
        let Some(cache) = self.cache.as_mut() else {
            self.fill.unreserve(room);
            return 0;
        };
        // No reset on get: a frame's header is written on receive (see get_burst_for_kernel).
        let got = cache.get_burst_for_kernel(&mut self.scratch, room as usize) as u32;
        let mut written = 0u32;
        for h in self.scratch.drain(..) {
            match self.ledger.lend_owned(h, LentTo::Fill) {
                Ok(off) => {
                    self.fill.write_addr(idx.wrapping_add(written), off);
                    written += 1;
                }
                Err(h) => {
                    self.stats.parked += 1;
                    self.parked.push(h);
                }
            }
        }
        self.fill.unreserve(room - written);
        if got == 0 {
            self.stats.fill_starved += 1;
        }
        if written > 0 {
            self.fill.submit(written);
            self.ledger.add_kernel_lent(written as isize);
            self.stats.fill_bursts += 1;
            self.stats.frames_filled += u64::from(written);
        }
        written
    }

    /// Appends up to a burst of RX descriptors to `out` as [`Frame`]s (ledger-checked).
    fn rx_burst(&mut self, out: &mut Vec<Frame<P::T, P::B, P::R>>) -> usize {
        if !self.rx.is_mapped() {
            return 0;
        }
        let (idx, n) = self.rx.peek(self.burst);
        let object_size = self.object_size as usize;
        let start = out.len();
        // Spare capacity and local sums: no call or store to `self` in the loop (registers).
        out.reserve(n as usize);
        let spare = &mut out.spare_capacity_mut()[..n as usize];
        let mut bytes = 0u64;
        let read = self.rx.desc_reader();
        let (good, bad) = self.ledger.reclaim_burst(
            n,
            LentTo::Fill,
            |k| {
                let d = read(idx.wrapping_add(k));
                (d.addr, d.len)
            },
            |i, handle, offset, len| {
                bytes += u64::from(len);
                // i < n = spare.len(): always a slot. (`if let`, not an index, whose panic
                // path would put a call back into the loop.)
                let slot = spare.get_mut(i as usize);
                debug_assert!(slot.is_some(), "i < n");
                if let Some(slot) = slot {
                    slot.write(Frame {
                        handle,
                        offset,
                        len,
                    });
                }
            },
        );
        let good = good as usize;
        // SAFETY: the first `good` spare slots were written above (good descriptor i wrote
        // slot i), and `good <= n <=` the capacity reserved.
        unsafe { out.set_len(out.len() + good) };
        if <P::T as RxObject>::FRONT > 0 {
            // Headers in a pass of their own (none for `Pod`): the ledger checked FRONT <=
            // offset, offset + len within the object, so the window fits past the header.
            let geometry = self.pool().geometry;
            for f in &out[start..] {
                let obj = <P::T as Element>::from_addr(
                    <P::R as ReprImpl>::ptr(&geometry, f.handle.entry()),
                    object_size,
                );
                // SAFETY: the one handle of a frame the ledger just gave back (a pool object
                // of the object size), unseen by the caller: the only reference, ending here.
                unsafe { &mut *obj }.received_fitting(
                    f.offset - <P::T as RxObject>::FRONT,
                    f.len,
                    0,
                    Checked(()),
                );
            }
        }
        self.stats.rx_bytes += bytes;
        self.stats.bad_descriptors += u64::from(bad);
        if n > 0 {
            self.rx.release(n);
        }
        if good > 0 {
            self.ledger.add_kernel_lent(-(good as isize));
            self.stats.rx_packets += good as u64;
        }
        good
    }

    /// One round: reaps TX completions, refills, reads RX; if empty, waits in `poll(2)` up to
    /// `wait` and reads again. Appends a [`Frame`] per packet to `out`; returns how many.
    ///
    /// # Errors
    /// [`PoolError::Kernel`] when `poll(2)` fails (other than `EINTR`).
    pub fn poll(
        &mut self,
        out: &mut Vec<Frame<P::T, P::B, P::R>>,
        wait: Option<Duration>,
    ) -> Result<usize, PoolError> {
        // Completions first: their frames (recycled or cached) are what the refill lends.
        if self.tx.is_mapped() {
            self.complete();
        }
        self.refill();
        let n = self.rx_burst(out);
        if n > 0 {
            return Ok(n);
        }
        let ms = match wait {
            Some(d) if !d.is_zero() => d.as_millis().clamp(1, i32::MAX as u128) as i32,
            _ => {
                if self.fill.is_mapped() && self.fill.needs_wakeup() {
                    self.wake_rx();
                }
                return Ok(0);
            }
        };
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(PoolError::Kernel {
                    op: "poll (xdp socket)",
                    source: e,
                });
            }
        }
        self.refill();
        Ok(self.rx_burst(out))
    }

    /// A `recvfrom` for a kernel that asks to be woken to take fill entries (driver mode).
    fn wake_rx(&mut self) {
        // SAFETY: a zero-length receive on our socket, no buffer.
        unsafe {
            libc::recvfrom(
                self.fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }

    /// Moves frames from the front of `frames` to the TX ring as room allows, then kicks the
    /// kernel. Each is lent until its completion ([`XdpSocket::complete`], run by
    /// [`XdpSocket::poll`]) returns it to the pool. Returns how many were handed over.
    ///
    /// # Errors
    /// Nothing is handed over when a frame is not valid: [`PoolError::ForeignHandle`],
    /// [`PoolError::BadDescriptor`] ([`DescriptorFault::PastFrame`]: `offset + len` past the
    /// object, or empty; [`DescriptorFault::InHeader`]: in a [`crate::PacketBuf`]'s header),
    /// [`PoolError::IndexOutOfRange`] (past the UMEM); [`PoolError::InvalidConfig`] without a
    /// TX ring. [`PoolError::Kernel`] when the kick fails with other than
    /// `EAGAIN`/`EBUSY`/`ENOBUFS` (the frames are lent then, and complete later).
    pub fn transmit(
        &mut self,
        frames: &mut Vec<Frame<P::T, P::B, P::R>>,
    ) -> Result<usize, PoolError> {
        if !self.tx.is_mapped() {
            return Err(PoolError::config("xdp socket: no TX ring (XdpConfig::tx)"));
        }
        let frames_max = self.ledger.frames();
        for f in frames.iter() {
            self.pool().check(&f.handle)?;
            if f.len == 0 || u64::from(f.offset) + u64::from(f.len) > self.object_size {
                return Err(PoolError::BadDescriptor {
                    addr: u64::from(f.offset),
                    len: f.len,
                    fault: DescriptorFault::PastFrame,
                });
            }
            // A packet buffer's header is not packet data (FRONT 0 for `Pod`: no compare).
            if f.offset < <P::T as RxObject>::FRONT {
                return Err(PoolError::BadDescriptor {
                    addr: u64::from(f.offset),
                    len: f.len,
                    fault: DescriptorFault::InHeader,
                });
            }
            let index = self.pool().index_of(&f.handle);
            if index >= frames_max {
                return Err(PoolError::IndexOutOfRange {
                    index,
                    capacity: frames_max,
                });
            }
        }
        let (idx, n) = self.tx.reserve(frames.len().min(u32::MAX as usize) as u32);
        let mut w = 0u32;
        for f in frames.drain(..n as usize) {
            let Ok(off) = self.ledger.lend_owned(f.handle, LentTo::Tx) else {
                unreachable!("every frame was checked to be in the UMEM");
            };
            self.tx.write_desc(
                idx.wrapping_add(w),
                XdpDesc {
                    addr: off + u64::from(f.offset),
                    len: f.len,
                    options: 0,
                },
            );
            w += 1;
        }
        self.submit_tx(w)
    }

    /// Publishes the `w` descriptors written since `reserve`, counts them lent, kicks.
    fn submit_tx(&mut self, w: u32) -> Result<usize, PoolError> {
        if w > 0 {
            self.tx.submit(w);
            self.ledger.add_kernel_lent(w as isize);
            self.stats.tx_frames += u64::from(w);
        }
        self.kick_tx()?;
        Ok(w as usize)
    }

    /// Asks the kernel to send the TX ring (`sendto` of nothing) when it said it needs that.
    /// In copy mode it sends a bounded batch per call: call again while frames are lent to TX.
    ///
    /// # Errors
    /// As [`XdpSocket::transmit`]'s kick.
    pub fn kick_tx(&mut self) -> Result<(), PoolError> {
        if !self.tx.is_mapped() || !self.tx.needs_wakeup() {
            return Ok(());
        }
        self.stats.tx_kicks += 1;
        // SAFETY: a zero-length send on our socket, no buffer.
        let rc = unsafe {
            libc::sendto(
                self.fd,
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS)
                | Some(libc::EINTR) => {}
                _ => {
                    return Err(PoolError::Kernel {
                        op: "sendto (xdp tx kick)",
                        source: e,
                    })
                }
            }
        }
        Ok(())
    }

    /// Reaps TX completions into the socket's cache (or the fill ring, with
    /// [`XdpConfig::recycle_tx`]). Returns how many.
    pub fn complete(&mut self) -> usize {
        if !self.comp.is_mapped() {
            return 0;
        }
        let mut total = 0usize;
        let recycle = self.recycle_tx && self.fill.is_mapped() && self.rx.is_mapped();
        loop {
            let (idx, n) = self.comp.peek(self.burst);
            if n == 0 {
                break;
            }
            let mut first = 0u32;
            if recycle {
                let (consumed, recycled) = self.recycle(idx, n);
                first = consumed;
                total += recycled as usize;
            }
            for k in first..n {
                let addr = self.comp.read_addr(idx.wrapping_add(k));
                match self.ledger.reclaim_owned(addr, 0, LentTo::Tx) {
                    Ok((h, _)) => self.scratch.push(h),
                    Err(_) => self.stats.bad_descriptors += 1,
                }
            }
            self.comp.release(n);
            let good = self.scratch.len();
            total += good;
            self.ledger.add_kernel_lent(-(good as isize));
            match self.cache.as_mut() {
                Some(c) => c.put_bulk(&mut self.scratch),
                None => self.ledger.pool().pool().put_bulk(&mut self.scratch),
            }
        }
        self.stats.tx_completed += total as u64;
        total
    }

    /// Recycles up to `n` completions from `idx` as lend target and room allow; returns how
    /// many it consumed (refused ones too: counted, never lent again) and recycled.
    fn recycle(&mut self, idx: u32, n: u32) -> (u32, u32) {
        let want = self
            .lend_target
            .saturating_sub(self.ledger.lent(LentTo::Fill))
            .min(n);
        if want == 0 {
            return (0, 0);
        }
        let (fidx, room) = self.fill.reserve(want);
        let (mut k, mut w) = (0u32, 0u32);
        while w < room && k < n {
            let addr = self.comp.read_addr(idx.wrapping_add(k));
            k += 1;
            match self.ledger.relend_tx_to_fill(addr) {
                Ok(off) => {
                    self.fill.write_addr(fidx.wrapping_add(w), off);
                    w += 1;
                }
                Err(_) => self.stats.bad_descriptors += 1,
            }
        }
        self.fill.unreserve(room - w);
        if w > 0 {
            // Lent before (TX) and lent now (fill): the pool's lent count is unchanged.
            self.fill.submit(w);
            self.stats.tx_recycled += u64::from(w);
            self.stats.frames_filled += u64::from(w);
            self.stats.fill_bursts += 1;
        }
        (k, w)
    }

    /// The pool indices of every frame lent now (either ring), in order.
    pub fn lent_indices(&self) -> Vec<u32> {
        self.ledger.lent_indices()
    }

    /// Closes socket and UMEM, then takes every lent and parked frame back. Idempotent (Drop).
    fn close(&mut self) {
        if !self.xsk.is_null() {
            if self.rx.is_mapped() {
                self.stats.discarded_at_drop += u64::from(self.rx.backlog());
            }
            // SAFETY: our socket, deleted once (nulled). Unbinding waits for the kernel's
            // receive paths (synchronize_net): no frame written after. Ring structs: boxed, alive.
            unsafe { sys::xsk_socket__delete(self.xsk) };
            self.xsk = std::ptr::null_mut();
        }
        if !self.umem.is_null() {
            // SAFETY: our UMEM, its only socket deleted above; deleted once (nulled).
            unsafe { sys::xsk_umem__delete(self.umem) };
            self.umem = std::ptr::null_mut();
        }
        let mut back = std::mem::take(&mut self.parked);
        self.ledger.reclaim_all(&mut back);
        match self.cache.as_mut() {
            Some(c) => c.put_bulk(&mut back),
            None => self.ledger.pool().pool().put_bulk(&mut back),
        }
    }
}

impl<P> XdpSocket<P>
where
    P: PoolRef<T = PacketBuf> + Clone + 'static,
{
    /// [`XdpSocket::transmit`] for packet buffers: each descriptor is the data window in the
    /// buffer's header (frame + 16 + data offset, length), so no [`Frame`] is needed.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// use idxpool::xdp::{XdpConfig, XdpSocket};
    /// use idxpool::{PoolBuilder, StrideMode};
    ///
    /// // 16 + 2032 = 2048-byte buffers: one AF_XDP frame each.
    /// let pool = PoolBuilder::packet_bufs(4096, 2032, 0).stride(StrideMode::Natural).build()?;
    /// let pool = Arc::new(pool);
    /// let mut cfg = XdpConfig::new("xdp0");
    /// cfg.tx = true;
    /// let mut xsk = XdpSocket::new(pool.clone(), &cfg)?;
    /// let mut h = xsk.get()?;
    /// pool.get_mut(&mut h).extend_from_slice(&[0xff; 60])?; // a frame to send
    /// let mut bufs = vec![h];
    /// while !bufs.is_empty() {
    ///     xsk.transmit_bufs(&mut bufs)?;
    ///     xsk.complete();
    /// }
    /// # Ok::<(), idxpool::PoolError>(())
    /// ```
    ///
    /// # Errors
    /// Nothing is handed over when a buffer is not valid: [`PoolError::ForeignHandle`],
    /// [`PoolError::IndexOutOfRange`] (past the UMEM: a `grow`'s), [`PoolError::BadDescriptor`]
    /// with [`DescriptorFault::Empty`] (no data); [`PoolError::InvalidConfig`] without a TX
    /// ring. [`PoolError::Kernel`] as [`XdpSocket::transmit`]'s kick.
    pub fn transmit_bufs(
        &mut self,
        bufs: &mut Vec<Handle<PacketBuf, P::B, P::R>>,
    ) -> Result<usize, PoolError> {
        if !self.tx.is_mapped() {
            return Err(PoolError::config("xdp socket: no TX ring (XdpConfig::tx)"));
        }
        let frames_max = self.ledger.frames();
        let pool = self.ledger.pool().pool();
        for h in bufs.iter() {
            pool.check(h)?;
            let index = pool.index_of(h);
            if index >= frames_max {
                return Err(PoolError::IndexOutOfRange {
                    index,
                    capacity: frames_max,
                });
            }
            let b = pool.get_ref(h);
            if b.is_empty() {
                return Err(PoolError::BadDescriptor {
                    addr: u64::from(index) * pool.stride() as u64
                        + u64::from(<PacketBuf as RxObject>::FRONT)
                        + b.headroom() as u64,
                    len: 0,
                    fault: DescriptorFault::Empty,
                });
            }
        }
        let (idx, n) = self.tx.reserve(bufs.len().min(u32::MAX as usize) as u32);
        let mut w = 0u32;
        for h in bufs.drain(..n as usize) {
            // The header's invariant: off + len <= the room, so the window is in the frame.
            let b = self.ledger.pool().pool().get_ref(&h);
            let (off, len) = (
                u64::from(<PacketBuf as RxObject>::FRONT) + b.headroom() as u64,
                b.len() as u32,
            );
            let Ok(frame) = self.ledger.lend_owned(h, LentTo::Tx) else {
                unreachable!("every buffer was checked to be in the UMEM");
            };
            self.tx.write_desc(
                idx.wrapping_add(w),
                XdpDesc {
                    addr: frame + off,
                    len,
                    options: 0,
                },
            );
            w += 1;
        }
        self.submit_tx(w)
    }
}

impl<T: ?Sized + RxObject, B: crate::Brand, R: crate::repr::Repr>
    XdpSocket<std::sync::Arc<Pool<T, B, R>>>
{
    /// [`Pool::audit`] while frames are lent, plus: each lent frame named once, by the ledger
    /// alone, their number `lent_to_kernel`. Flushes the cache; needs the only `Arc` (quiescence).
    ///
    /// # Errors
    /// [`PoolError::AuditFailed`] for a broken invariant, or when other references to the
    /// pool are alive.
    pub fn audit(&mut self) -> Result<crate::AuditReport, PoolError> {
        let mut lent = self.ledger.lent_indices();
        // Parked objects are the socket's: lent, for the audit's naming.
        let pool = self.ledger.pool().clone();
        lent.extend(self.parked.iter().map(|h| pool.index_of(h)));
        drop(pool);
        self.cache = None;
        let parked = self.parked.len() as isize;
        self.ledger.add_kernel_lent(parked);
        let r = match self.ledger.pool_mut() {
            Some(pool) => pool.audit_with_lent(Some(&lent)),
            None => Err(PoolError::AuditFailed(
                "xdp: other references to the pool are alive".into(),
            )),
        };
        self.ledger.add_kernel_lent(-parked);
        self.cache = Some(LocalCache::new(self.ledger.pool().clone()));
        r
    }
}

impl<P: PoolRef + Clone + 'static> Drop for XdpSocket<P>
where
    P::T: RxObject,
{
    fn drop(&mut self) {
        self.close();
    }
}

impl<P: PoolRef + Clone + 'static> std::fmt::Debug for XdpSocket<P>
where
    P::T: RxObject,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpSocket")
            .field("pool", &self.pool().name())
            .field("fd", &self.fd)
            .field("ledger", &self.ledger)
            .field("stats", &self.stats)
            .finish()
    }
}
