//! Making and dropping the objects in place: build, `grow` and the pool's drop.

use super::*;

/// An object initialiser, with the object type erased so that the builder serves unsized
/// elements too: `init(i, obj, written)` initialises object `i` in `obj` and sets `written`
/// once a whole object is there. Made only by the builder's constructors, which know `T`;
/// called only by `pool::init_objects` (at build and in `grow`), which hands it the object's
/// memory as an [`UninitObject`].
/// `Send`: a growable pool keeps it and calls it from the thread that calls `grow`.
pub(crate) type InitFn<'a> =
    Box<dyn FnMut(u32, UninitObject<'_>, &std::sync::atomic::AtomicBool) + Send + 'a>;

/// A pool's live capacity (the core's: the counts and the drop read it; `grow.rs` adds
/// objects) and what growing needs: the initialiser kept from the builder
/// (`None` for zeroed pools: fresh pages are zero) and the lock that serialises growth.
pub(crate) struct Growth {
    /// Objects initialised and in the pool: `0 ..= geometry.capacity` (the maximum).
    /// Written only under `state`'s lock, with `Release` after the new objects' entries are
    /// in the ring.
    pub(crate) cap: crate::sync::AtomicU32,
    /// The initialiser, under the lock that serialises growth. The lock word names the
    /// thread inside `grow` (`fork::RawLock`): a `grow` from the initialiser it runs is
    /// refused instead of deadlocking, and in a forked child a lock held by a thread that
    /// does not exist there is reported instead of waited for. Not in the fork handlers'
    /// lock order (crate::fork): the initialiser, user code, runs under it.
    pub(crate) state: crate::fork::Lock<Option<InitFn<'static>>>,
}

impl Growth {
    /// A pool of `cap` objects that grows with `init` (kept only when it may grow).
    pub(crate) fn new(cap: u32, init: Option<InitFn<'static>>) -> Self {
        Growth {
            cap: crate::sync::AtomicU32::new(cap),
            state: crate::fork::Lock::new(init),
        }
    }

    /// The live capacity (`Acquire`: pairs with the `Release` of `grow`).
    #[inline]
    pub(crate) fn capacity(&self) -> u32 {
        self.cap.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl<T: ?Sized + Element, B, R: Repr> Pool<T, B, R> {
    /// Adds `n` objects after the live capacity (the build from 0, and `grow`): makes their
    /// memory usable, makes them with `init` (else the initialiser `held` keeps; none: a
    /// zeroed pool, whose fresh pages are zero), gives their entries to the ring in index
    /// order (its release orders the initialisation before any consumer's access), then
    /// publishes the new capacity (`Release`: a reader that sees it sees the new objects
    /// counted in the ring) and wakes waiters. Returns the new capacity.
    ///
    /// `held` is the data of this pool's growth lock, which only the lock's holder can lend
    /// as `&mut`. The invariant that makes the new objects this call's alone: objects at or
    /// beyond the live capacity are named by nothing (no handle, entry or reference), and
    /// only the holder of the growth lock moves the capacity.
    ///
    /// # Errors
    /// [`PoolError::GrowBeyondMax`] when the capacity plus `n` exceeds the maximum (nothing
    /// done); the region's error when the memory cannot be had (nothing added).
    ///
    /// # Panics
    /// When `held` is not this pool's growth lock's data; when the initialiser panics (the
    /// objects it made are dropped, none is added, the pool keeps its capacity).
    pub(crate) fn add_objects(
        &self,
        held: &mut Option<InitFn<'static>>,
        init: Option<&mut ObjectInit<'_>>,
        n: u32,
    ) -> Result<u32, PoolError> {
        assert!(
            self.growth.state.holds(held),
            "idxpool: the growth lock's data"
        );
        // Written only under the growth lock, which the caller holds.
        let old = self.growth.cap.load(std::sync::atomic::Ordering::Relaxed);
        let (g, max) = (&self.geometry, self.geometry.capacity);
        let want = u64::from(old) + u64::from(n);
        if want > u64::from(max) {
            return Err(PoolError::GrowBeyondMax {
                requested: want,
                max,
            });
        }
        if n == 0 {
            return Ok(old);
        }
        let new = want as u32;
        // new x stride <= max x stride: the region reserves that (the build checked it).
        self.region.commit(new as usize * g.stride)?;
        let init = match init {
            Some(init) => Some(init),
            None => held.as_mut().map(|f| &mut **f as &mut ObjectInit<'_>),
        };
        if let Some(init) = init {
            // SAFETY: objects old..new lie in memory just made usable (or by an earlier call
            // whose initialiser panicked: those objects were dropped), at or beyond the live
            // capacity, so nothing names them (the invariant above).
            unsafe { init_objects::<T>(g, old, new, init) };
        }
        let mut chunk: Vec<R::Entry> = Vec::with_capacity(4096.min(n as usize));
        let mut i = old;
        while i < new {
            chunk.clear();
            let end = new.min(i.saturating_add(4096));
            chunk.extend((i..end).map(|j| R::encode(g, j)));
            // The ring holds `max` entries and at most `new <= max` objects exist.
            assert!(
                self.core.ring.enqueue_bulk(&chunk),
                "idxpool: ring sized for the maximum"
            );
            i = end;
        }
        self.growth
            .cap
            .store(new, std::sync::atomic::Ordering::Release);
        // Waiters for objects (wait.rs): the new ones are in the ring.
        self.core.after_put();
        Ok(new)
    }
}

/// The memory of one object while the pool's initialiser makes it (at build and in
/// [`Pool::grow`]): `len` bytes (the element's size) at `p`, aligned for the element,
/// uninitialised (or already dropped) and seen by nobody else for `'s`. Made only by
/// [`init_objects`], under its contract; the typed initialisers of the builder turn it into
/// the `&mut MaybeUninit<T>` they write.
pub(crate) struct UninitObject<'s> {
    p: NonNull<u8>,
    len: usize,
    _exclusive: PhantomData<&'s mut [MaybeUninit<u8>]>,
}

impl<'s> UninitObject<'s> {
    /// The object as a `MaybeUninit<T>`, exclusive for `'s`.
    ///
    /// # Panics
    /// When `T` is larger than the element or the object is not aligned for it: never for
    /// the builder's initialisers, which are made for the pool's own `T` (two compares per
    /// object made, outside every get and put).
    #[inline]
    pub(crate) fn into_uninit<T>(self) -> &'s mut MaybeUninit<T> {
        let p = self.p.as_ptr().cast::<MaybeUninit<T>>();
        assert!(
            std::mem::size_of::<T>() <= self.len && p.is_aligned(),
            "object initialiser for another element type"
        );
        // SAFETY: `p` is valid for writes of `len >= size_of::<T>()` bytes, aligned for `T`
        // (checked), and nobody else sees the object for 's (made by `init_objects`);
        // `MaybeUninit<T>` accepts any content.
        unsafe { &mut *p }
    }
}

/// An object initialiser as [`init_objects`] calls it: `init(i, obj, written)` makes object
/// `i` in `obj` and sets `written` once a whole object is there (the builder's `InitFn`).
pub(crate) type ObjectInit<'f> =
    dyn FnMut(u32, UninitObject<'_>, &std::sync::atomic::AtomicBool) + 'f;

/// Initialises objects `from..to` of `g` with `init` (the builder's initialiser), in index
/// order: at build and in [`Pool::grow`]. If `init` panics, the objects it made are dropped
/// (those of earlier calls, and that of the panicking call if `InitSlot::write` ran: `init`
/// sets its flag argument once a whole object is there) and the panic goes on.
///
/// # Safety
/// Objects `from..to` lie in usable memory of the region `g` describes, are uninitialised (or
/// dropped) and seen by nobody else until this returns.
pub(crate) unsafe fn init_objects<T: ?Sized + Element>(
    g: &Geometry,
    from: u32,
    to: u32,
    init: &mut ObjectInit<'_>,
) {
    struct Guard<'g, T: ?Sized + Element> {
        g: &'g Geometry,
        from: u32,
        done: u32,
        written: &'g std::sync::atomic::AtomicBool,
        _t: PhantomData<super::Invariant<T>>,
    }
    impl<T: ?Sized + Element> Drop for Guard<'_, T> {
        fn drop(&mut self) {
            // Only this thread wrote the flag (or a thread it joined before `init` returned
            // or unwound): Relaxed is enough.
            let written = u32::from(self.written.load(std::sync::atomic::Ordering::Relaxed));
            // SAFETY: objects from..done were initialised by this call, `done` too when its
            // `write` ran; nobody else has seen them (the caller's contract).
            unsafe { drop_objects::<T>(self.g, self.from, self.done + written) };
        }
    }
    let written = std::sync::atomic::AtomicBool::new(false);
    let mut guard = Guard::<T> {
        g,
        from,
        done: from,
        written: &written,
        _t: PhantomData,
    };
    for i in from..to {
        written.store(false, std::sync::atomic::Ordering::Relaxed);
        let obj = UninitObject {
            // Inside usable memory (the caller's contract), hence non-null; aligned (base and
            // stride are); unshared (the caller's contract), for this call of `init` only.
            p: NonNull::new(g.ptr_of_index(i)).expect("object pointer is non-null"),
            len: g.elem_len,
            _exclusive: PhantomData,
        };
        init(i, obj, &written);
        guard.done = i + 1;
    }
    std::mem::forget(guard);
}

/// Drops objects `from..to` in place, and keeps dropping after a panicking `T::drop`, as `Vec`
/// does: the rest are dropped while the panic unwinds (a second panic then aborts, as for a
/// panic in any destructor during unwinding), and the panic goes on to the caller.
///
/// # Safety
/// Objects `from..to` of `g` are initialised, dropped by nobody else, and not used afterwards.
pub(crate) unsafe fn drop_objects<T: ?Sized + Element>(g: &Geometry, from: u32, to: u32) {
    struct Rest<'g, T: ?Sized + Element> {
        g: &'g Geometry,
        next: u32,
        to: u32,
        _t: PhantomData<super::Invariant<T>>,
    }
    impl<T: ?Sized + Element> Drop for Rest<'_, T> {
        fn drop(&mut self) {
            // Reached only while unwinding from the panicking drop of object `next - 1`.
            // SAFETY: objects next..to are still initialised and not yet dropped.
            unsafe { drop_objects::<T>(self.g, self.next, self.to) };
        }
    }
    let mut rest = Rest::<T> {
        g,
        next: from,
        to,
        _t: PhantomData,
    };
    while rest.next < rest.to {
        let i = rest.next;
        rest.next += 1;
        // SAFETY: forwarded from the caller: object i is initialised and dropped only here.
        unsafe { std::ptr::drop_in_place(T::from_addr(g.ptr_of_index(i), g.elem_len)) };
    }
    std::mem::forget(rest);
}
