//! The process's own record of each shared region it attached ([`ProcessRegion`], shared by `Arc`
//! among its attachments of the region), where no peer can write: which objects the process holds
//! (a claim whose bit is set already is a forged entry, refused, so the process never has two live
//! handles to one object, however many attachments it has), and the layout attached with (every
//! later attachment here must read the same header, field by field).
//!
//! A region is identified by its file's device and inode, not the process id: after `fork`, a
//! child's new attachments join the copied record, so they never hand out an object a copy of a
//! parent's attachment holds (tests/shared_fork.rs; why, and the price: DESIGN.md, "Ownership
//! model"). The list keeps `Weak`s and forgets dead ones.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use super::header::Header;
use crate::error::PoolError;
use crate::fork::GlobalLock;

/// What this process knows of one region (see the module docs).
pub(crate) struct ProcessRegion {
    dev: u64,
    ino: u64,
    /// The header copy the first attachment of the region in this process validated.
    header: Header,
    /// One bit per object (`capacity` bits): held by an attachment of this process.
    held: Box<[AtomicU64]>,
}

/// The regions of this process (after a fork, also the records copied from the parent, kept alive
/// by the child's copies of its attachments). A global lock of the fork module's order, taken for a
/// lookup at create and attach, never on a get or put; nothing is taken under it.
static REGIONS: GlobalLock<Vec<Weak<ProcessRegion>>> = GlobalLock::new(Vec::new());

impl ProcessRegion {
    /// The record of the region in `file`, whose header copy `header` the caller validated (attach)
    /// or computed (create): this process's record if the region is attached here, else a new one.
    ///
    /// # Errors
    /// [`PoolError::LayoutMismatch`] naming the first field (parameter, section offset,
    /// `fingerprint`) where `header` differs from the one attached here (`expected`: that one's;
    /// `found`: this copy's); [`PoolError::SharedFile`] when `fstat` fails.
    pub(crate) fn join(
        file: &File,
        path: &std::path::Path,
        header: &Header,
    ) -> Result<Arc<ProcessRegion>, PoolError> {
        let md = file
            .metadata()
            .map_err(|e| super::file::file_err(path, "stat", e))?;
        let (dev, ino) = (md.dev(), md.ino());
        let mut list = REGIONS.lock();
        list.retain(|w| w.strong_count() > 0);
        let found = list
            .iter()
            .filter_map(Weak::upgrade)
            .find(|r| (r.dev, r.ino) == (dev, ino));
        if let Some(r) = found {
            drop(list);
            r.agrees(header)?;
            return Ok(r);
        }
        let words = header.params.capacity.div_ceil(64) as usize;
        let r = Arc::new(ProcessRegion {
            dev,
            ino,
            header: *header,
            held: (0..words).map(|_| AtomicU64::new(0)).collect(),
        });
        list.push(Arc::downgrade(&r));
        Ok(r)
    }

    /// Checks that `h` is the header the region is attached with in this process.
    fn agrees(&self, h: &Header) -> Result<(), PoolError> {
        let mine = &self.header;
        let fields = mine
            .params
            .fields()
            .into_iter()
            .chain(mine.sections.fields())
            .zip(h.params.fields().into_iter().chain(h.sections.fields()))
            .chain([(
                ("fingerprint", mine.fingerprint),
                ("fingerprint", h.fingerprint),
            )]);
        for ((field, expected), (_, found)) in fields {
            if expected != found {
                return Err(PoolError::LayoutMismatch {
                    field,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Records that an attachment of this process claimed object `e`; false (no change) when one
    /// holds it already or `e` is out of range.
    ///
    /// Acquire: the previous holder here released the object ([`ProcessRegion::release`]) after its
    /// last access, so ours follow it even if the (peer-writable) owner word carried no order.
    #[inline(always)]
    pub(crate) fn claim(&self, e: u32) -> bool {
        let Some(w) = self.held.get((e >> 6) as usize) else {
            return false;
        };
        let b = 1u64 << (e & 63);
        w.fetch_or(b, Ordering::AcqRel) & b == 0
    }

    /// Records that an attachment of this process released object `e` (which it held).
    #[inline(always)]
    pub(crate) fn release(&self, e: u32) {
        if let Some(w) = self.held.get((e >> 6) as usize) {
            w.fetch_and(!(1u64 << (e & 63)), Ordering::Release);
        }
    }

    /// Releases the objects set in `bits`, bitmap word `w` (a departing attachment's holdings).
    pub(crate) fn release_word(&self, w: usize, bits: u64) {
        if let Some(word) = self.held.get(w) {
            word.fetch_and(!bits, Ordering::Release);
        }
    }

    /// Whether an attachment of this process holds object `e`.
    pub(crate) fn holds(&self, e: u32) -> bool {
        self.held
            .get((e >> 6) as usize)
            .is_some_and(|w| w.load(Ordering::Acquire) & (1u64 << (e & 63)) != 0)
    }
}
