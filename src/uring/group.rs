//! One buffer group's provided-buffer ring, shared with the kernel.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};

use crate::error::PoolError;

/// A provided-buffer ring of `entries` `struct io_uring_buf` slots (the tail in slot 0).
pub(super) struct Group {
    pub(super) bgid: u16,
    /// Pool index of bid 0.
    pub(super) first: u32,
    /// Buffers in the group (`BidMap::group_len`, kept here for the completion path).
    pub(super) len: u32,
    pub(super) mask: u16,
    /// The ring's memory, page-aligned, pinned by the kernel: a `MmapRaw` (never a slice over
    /// memory the kernel reads), accessed through [`Group::entry`].
    pub(super) mem: memmap2::MmapRaw,
    /// Next slot to write; published up to `published`.
    pub(super) tail: u16,
    pub(super) published: u16,
    /// Bit per bid: lent to the kernel (in the ring, or picked and not yet completed).
    pub(super) lent: Vec<u64>,
    pub(super) lent_count: u32,
    pub(super) registered: bool,
}

/// `struct io_uring_buf` (include/uapi/linux/io_uring.h) as atomics: the kernel reads the
/// published entries (and the tail, `resv` of entry 0) while the application writes others.
/// The C struct's size and alignment (16 bytes, 8-aligned); every bit pattern is valid.
#[repr(C)]
pub(super) struct RawBuf {
    addr: AtomicU64,
    len: AtomicU32,
    bid: AtomicU16,
    resv: AtomicU16,
}

// The kernel's layout: 16 bytes per entry, the tail at bytes 14..16 of entry 0.
const _: () = assert!(std::mem::size_of::<RawBuf>() == 16);

impl Group {
    pub(super) fn new(bgid: u16, first: u32, len: u32, entries: u32) -> Result<Group, PoolError> {
        let bytes = entries as usize * std::mem::size_of::<RawBuf>();
        let mem = memmap2::MmapMut::map_anon(bytes)
            .map_err(|source| PoolError::Kernel {
                op: "mmap (buffer ring)",
                source,
            })?
            .into();
        Ok(Group {
            bgid,
            first,
            len,
            mask: (entries - 1) as u16,
            mem,
            tail: 0,
            published: 0,
            lent: vec![0; len.div_ceil(64) as usize],
            lent_count: 0,
            registered: false,
        })
    }

    /// Entry `slot & mask`: the one view of the ring's memory, accessed only atomically.
    #[inline(always)]
    pub(super) fn entry(&self, slot: u16) -> &RawBuf {
        let slot = usize::from(slot & self.mask);
        // SAFETY: slot <= mask < entries: inside the mapping, which is page-aligned (so
        // RawBuf-aligned), zero-filled (a valid RawBuf: atomics take any bits) and lives as
        // long as `self`. Shared with the kernel only through atomics, never a `&mut`.
        unsafe { &*self.mem.as_ptr().cast::<RawBuf>().add(slot) }
    }

    /// Writes one entry at the local tail (not yet visible to the kernel).
    #[inline(always)]
    pub(super) fn push(&mut self, addr: u64, len: u32, bid: u16) {
        // The kernel reads only entries between its head and the published tail; this one is
        // past that tail (the ring holds every buffer of its group: the writer never laps the
        // head), so nobody reads it now: Relaxed stores, made visible by `publish`'s Release
        // store. `resv` (the tail, in entry 0) is not written here.
        let e = self.entry(self.tail);
        e.addr.store(addr, Ordering::Relaxed);
        e.len.store(len, Ordering::Relaxed);
        e.bid.store(bid, Ordering::Relaxed);
        self.tail = self.tail.wrapping_add(1);
        let w = usize::from(bid) / 64;
        self.lent[w] |= 1 << (bid % 64);
        self.lent_count += 1;
    }

    /// Makes the written entries visible: one release store of the tail. False if none.
    #[inline(always)]
    pub(super) fn publish(&mut self) -> bool {
        if self.tail == self.published {
            return false;
        }
        // The tail (`resv` of entry 0): the kernel's smp_load_acquire; written only here.
        self.entry(0).resv.store(self.tail, Ordering::Release);
        self.published = self.tail;
        true
    }

    /// Clears the lent bit of `bid`; false when it was not set.
    #[inline(always)]
    pub(super) fn take(&mut self, bid: u16) -> bool {
        let (w, b) = (usize::from(bid) / 64, bid % 64);
        match self.lent.get_mut(w) {
            Some(word) if *word & (1 << b) != 0 => {
                *word &= !(1 << b);
                self.lent_count -= 1;
                true
            }
            _ => false,
        }
    }

    /// Bids lent now.
    pub(super) fn lent_bids(&self) -> impl Iterator<Item = u16> + '_ {
        self.lent.iter().enumerate().flat_map(|(w, &word)| {
            (0..64u32)
                .filter(move |b| word & (1 << b) != 0)
                .map(move |b| (w as u32 * 64 + b) as u16)
        })
    }
}
