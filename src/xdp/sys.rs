//! The AF_XDP rings and the few libxdp calls the socket needs (feature `xdp`): the ABI of
//! `<xdp/xsk.h>` (libxdp 1.x) and `<linux/if_xdp.h>`, nothing else.
//!
//! libxdp creates and closes the UMEM and the socket (`xsk_umem__create`, `xsk_socket__create`:
//! `XDP_UMEM_REG`, ring set-up and mmap, bind, its default redirect program and `XSKMAP`). The
//! ring operations are `static inline` in the header, so they are written here over the
//! `struct xsk_ring_prod` / `xsk_ring_cons` libxdp fills in: cached indices, and pointers to
//! the producer and consumer words shared with the kernel, read with acquire and written with
//! release as the header's `__atomic` calls do.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

/// `XDP_UMEM_UNALIGNED_CHUNK_FLAG` (`<linux/if_xdp.h>`).
pub(crate) const UMEM_UNALIGNED_CHUNK_FLAG: u32 = 1 << 0;
/// `XDP_USE_NEED_WAKEUP`: the kernel says when a ring needs a system call to move.
pub(crate) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// `XDP_COPY`: force copy mode.
pub(crate) const XDP_COPY: u16 = 1 << 1;
/// `XDP_RING_NEED_WAKEUP` in a ring's flags word.
const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE` (`<linux/if_link.h>`).
pub(crate) const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
pub(crate) const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD`: bind the socket without loading a program.
pub(crate) const INHIBIT_PROG_LOAD: u32 = 1 << 0;
/// `XDP_PACKET_HEADROOM`: bytes the kernel keeps before a received packet in its frame.
pub const XDP_PACKET_HEADROOM: u32 = 256;

/// `struct xsk_ring_prod` / `struct xsk_ring_cons`: one layout for both.
#[repr(C)]
pub(crate) struct RawRing {
    cached_prod: u32,
    cached_cons: u32,
    mask: u32,
    size: u32,
    producer: *mut u32,
    consumer: *mut u32,
    ring: *mut c_void,
    flags: *mut u32,
}

/// `struct xdp_desc`: an RX or TX descriptor.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `struct xsk_umem_config`.
#[repr(C)]
pub(crate) struct UmemConfig {
    pub fill_size: u32,
    pub comp_size: u32,
    pub frame_size: u32,
    pub frame_headroom: u32,
    pub flags: u32,
}

/// `struct xsk_socket_config` (the union of `libbpf_flags` and `libxdp_flags` is one u32).
#[repr(C)]
pub(crate) struct SocketConfig {
    pub rx_size: u32,
    pub tx_size: u32,
    pub libxdp_flags: u32,
    pub xdp_flags: u32,
    pub bind_flags: u16,
}

/// Opaque libxdp objects.
#[repr(C)]
pub(crate) struct XskUmem {
    _p: [u8; 0],
}
#[repr(C)]
pub(crate) struct XskSocket {
    _p: [u8; 0],
}

#[link(name = "xdp")]
extern "C" {
    pub(crate) fn xsk_umem__create(
        umem: *mut *mut XskUmem,
        area: *mut c_void,
        size: u64,
        fill: *mut RawRing,
        comp: *mut RawRing,
        config: *const UmemConfig,
    ) -> c_int;
    pub(crate) fn xsk_socket__create(
        xsk: *mut *mut XskSocket,
        ifname: *const c_char,
        queue_id: u32,
        umem: *mut XskUmem,
        rx: *mut RawRing,
        tx: *mut RawRing,
        config: *const SocketConfig,
    ) -> c_int;
    pub(crate) fn xsk_socket__fd(xsk: *const XskSocket) -> c_int;
    pub(crate) fn xsk_socket__delete(xsk: *mut XskSocket);
    pub(crate) fn xsk_umem__delete(umem: *mut XskUmem) -> c_int;
}

impl RawRing {
    /// A ring not yet set up (libxdp fills it in).
    pub(crate) fn empty() -> Box<RawRing> {
        Box::new(RawRing {
            cached_prod: 0,
            cached_cons: 0,
            mask: 0,
            size: 0,
            producer: std::ptr::null_mut(),
            consumer: std::ptr::null_mut(),
            ring: std::ptr::null_mut(),
            flags: std::ptr::null_mut(),
        })
    }

    /// True once libxdp has mapped the ring.
    pub(crate) fn is_mapped(&self) -> bool {
        !self.ring.is_null()
    }

    /// This ring's producer, consumer or flags word at `p`, as an atomic borrowed from `self`.
    #[inline(always)]
    fn word(&self, p: *mut u32) -> &AtomicU32 {
        // SAFETY: one of this ring's words, in libxdp's mapping (the socket checks `is_mapped`
        // first), 4-byte aligned, shared with the kernel, only atomic. The socket unmaps it
        // only in its drop, after the last ring operation.
        unsafe { &*(p as *const AtomicU32) }
    }

    /// Producer: reserves `min(nb, free)` slots (`xsk_ring_prod__reserve`, best effort); returns
    /// the first index and the count.
    #[inline]
    pub(crate) fn reserve(&mut self, nb: u32) -> (u32, u32) {
        let mut free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free < nb {
            self.cached_cons = self
                .word(self.consumer)
                .load(Ordering::Acquire)
                .wrapping_add(self.size);
            free = self.cached_cons.wrapping_sub(self.cached_prod);
        }
        let n = free.min(nb);
        let idx = self.cached_prod;
        self.cached_prod = self.cached_prod.wrapping_add(n);
        (idx, n)
    }

    /// Producer side: gives back the last `nb` reserved slots, unwritten.
    #[inline]
    pub(crate) fn unreserve(&mut self, nb: u32) {
        self.cached_prod = self.cached_prod.wrapping_sub(nb);
    }

    /// Producer side: publishes `nb` reserved slots (one release store of the producer).
    #[inline]
    pub(crate) fn submit(&mut self, nb: u32) {
        let w = self.word(self.producer);
        w.store(
            w.load(Ordering::Relaxed).wrapping_add(nb),
            Ordering::Release,
        );
    }

    /// Consumer side: up to `nb` entries ready; returns the first index and the count.
    #[inline]
    pub(crate) fn peek(&mut self, nb: u32) -> (u32, u32) {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.word(self.producer).load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        let n = n.min(nb);
        let idx = self.cached_cons;
        self.cached_cons = self.cached_cons.wrapping_add(n);
        (idx, n)
    }

    /// Consumer side: gives `nb` read entries back (one release store of the consumer).
    #[inline]
    pub(crate) fn release(&mut self, nb: u32) {
        let w = self.word(self.consumer);
        w.store(
            w.load(Ordering::Relaxed).wrapping_add(nb),
            Ordering::Release,
        );
    }

    /// Entries published and not yet released (a consumer ring's backlog, read at drop).
    pub(crate) fn backlog(&self) -> u32 {
        self.word(self.producer)
            .load(Ordering::Acquire)
            .wrapping_sub(self.word(self.consumer).load(Ordering::Acquire))
    }

    /// The kernel asks for a system call to move this ring (`XDP_USE_NEED_WAKEUP`).
    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        self.word(self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }

    /// Writes an address at reserved slot `idx` of an address ring (fill), past the published
    /// producer, so the kernel does not read it yet.
    #[inline(always)]
    pub(crate) fn write_addr(&mut self, idx: u32, addr: u64) {
        let slot = (idx & self.mask) as usize;
        // SAFETY: an address ring of `size` u64 slots mapped by libxdp; slot <= mask < size.
        // Reserved (between the published producer and cached_prod): the kernel reads it only
        // after `submit`'s release store.
        unsafe { self.ring.cast::<u64>().add(slot).write_volatile(addr) }
    }

    /// Reads the address at `idx` of an address ring (completions).
    #[inline(always)]
    pub(crate) fn read_addr(&self, idx: u32) -> u64 {
        let slot = (idx & self.mask) as usize;
        // SAFETY: as `write_addr`; published by the kernel (`peek`'s acquire load) and not
        // released yet, so the kernel does not rewrite it.
        unsafe { self.ring.cast::<u64>().add(slot).read_volatile() }
    }

    /// Writes a descriptor at `idx` of a descriptor ring (TX): a reserved slot.
    #[inline(always)]
    pub(crate) fn write_desc(&mut self, idx: u32, d: XdpDesc) {
        let slot = (idx & self.mask) as usize;
        // SAFETY: a descriptor ring of `size` 16-byte `xdp_desc` slots mapped by libxdp;
        // slot < size; reserved, as `write_addr`.
        unsafe { self.ring.cast::<XdpDesc>().add(slot).write_volatile(d) }
    }

    /// A reader of an RX ring (`read(idx)`), address and mask copied in: a burst loop's stores
    /// could alias the ring's fields for all the compiler knows, forcing reloads.
    #[inline(always)]
    pub(crate) fn desc_reader(&self) -> impl Fn(u32) -> XdpDesc + Copy + '_ {
        let (ring, mask) = (self.ring.cast::<XdpDesc>(), self.mask);
        move |idx| {
            let slot = (idx & mask) as usize;
            // SAFETY: as `read_addr` (the closure borrows the ring: its mapping is alive).
            unsafe { ring.add(slot).read_volatile() }
        }
    }
}

const _: () = assert!(std::mem::size_of::<XdpDesc>() == 16);
const _: () = assert!(std::mem::size_of::<SocketConfig>() == 20);
const _: () = assert!(std::mem::size_of::<RawRing>() == 48);
