//! The plugins' allocator: a cache of freed small blocks, by size class, in front of the
//! target's default allocator (dlmalloc on wasm32).
//!
//! Why: every string and list the host passes to `evaluate` is its own allocation, made through
//! `cabi_realloc` before the call and freed when the request is dropped after it: some 35 per
//! call for a short conversation, each costing ~490 instructions through dlmalloc and its
//! wrappers (measured with callgrind, BENCHMARKS.md §16). The same sizes come back on every
//! call, so a freed block is kept on its class's list and handed out again: a pop or a push.
//!
//! Blocks are never given back to dlmalloc; nothing is lost by that, since a wasm memory never
//! shrinks and dlmalloc keeps what it frees too. Sizes over [`MAX_CACHED`] and alignments over
//! [`ALIGN`] go straight to the default allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::ptr::null_mut;

/// Every cached block is aligned to this (and its size a multiple of it).
const ALIGN: usize = 16;
/// Largest size served from the cache.
const MAX_CACHED: usize = 16 << 10;
/// Classes: multiples of 16 up to 256, then powers of two up to `MAX_CACHED`.
const CLASSES: usize = 16 + 6;

/// The size class of a request of `size` bytes (1..=MAX_CACHED).
fn class_of(size: usize) -> usize {
    if size <= 256 {
        size.max(1).div_ceil(ALIGN) - 1
    } else {
        // 257..=512 → 16, 513..=1024 → 17, ...
        16 + (usize::BITS - (size - 1).leading_zeros()) as usize - 9
    }
}

/// The block size of class `c`.
fn class_size(c: usize) -> usize {
    if c < 16 {
        (c + 1) * ALIGN
    } else {
        512 << (c - 16)
    }
}

fn cached(layout: &Layout) -> bool {
    layout.align() <= ALIGN && layout.size() <= MAX_CACHED
}

/// The free lists: the head of each class's list, each free block holding the next one's
/// address in its first bytes.
pub(crate) struct Cache {
    heads: UnsafeCell<[*mut u8; CLASSES]>,
}

// SAFETY: used only where there is one thread (wasm32 without the atomics feature: a component
// instance never runs two calls at once), or, in tests, by one thread at a time.
unsafe impl Sync for Cache {}

impl Cache {
    pub(crate) const fn new() -> Cache {
        Cache {
            heads: UnsafeCell::new([null_mut(); CLASSES]),
        }
    }
}

unsafe impl GlobalAlloc for Cache {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !cached(&layout) {
            return unsafe { System.alloc(layout) };
        }
        let c = class_of(layout.size());
        // SAFETY: single-threaded (see `Sync`), and no other reference to `heads` is alive.
        let heads = unsafe { &mut *self.heads.get() };
        let head = heads[c];
        if head.is_null() {
            // SAFETY: a non-zero size, a power-of-two alignment.
            return unsafe {
                System.alloc(Layout::from_size_align_unchecked(class_size(c), ALIGN))
            };
        }
        // SAFETY: `head` is a free block of this class, whose first bytes hold the next one.
        heads[c] = unsafe { head.cast::<*mut u8>().read() };
        head
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if !cached(&layout) {
            return unsafe { System.dealloc(ptr, layout) };
        }
        let c = class_of(layout.size());
        // SAFETY: single-threaded; `ptr` is a block of class `c` (allocated for this layout's
        // size, or resized within its class), at least 16 bytes and 16-aligned, and no longer
        // used by its owner.
        let heads = unsafe { &mut *self.heads.get() };
        unsafe { ptr.cast::<*mut u8>().write(heads[c]) };
        heads[c] = ptr;
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if cached(&layout)
            && new_size <= MAX_CACHED
            && class_of(layout.size()) == class_of(new_size)
        {
            // The block already has room for the new size.
            return ptr;
        }
        // SAFETY: the caller's contract for `realloc`, passed on to `alloc` and `dealloc`.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
    }
}

#[cfg(all(target_family = "wasm", not(test)))]
#[global_allocator]
static ALLOCATOR: Cache = Cache::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_every_size_once() {
        let mut last = 0;
        for size in 1..=MAX_CACHED {
            let c = class_of(size);
            assert!(c < CLASSES, "size {size}");
            assert!(class_size(c) >= size, "size {size} in class {c}");
            assert!(c == last || c == last + 1, "size {size} skips a class");
            assert_eq!(class_size(c) % ALIGN, 0);
            if c > 0 {
                assert!(class_size(c - 1) < size, "size {size} fits a smaller class");
            }
            last = c;
        }
        assert_eq!(class_of(MAX_CACHED), CLASSES - 1);
    }

    #[test]
    fn blocks_are_reused_and_keep_their_bytes_apart() {
        let cache = Cache::new();
        unsafe {
            let l = Layout::from_size_align(24, 8).unwrap();
            let a = cache.alloc(l);
            let b = cache.alloc(l);
            assert_ne!(a, b);
            assert_eq!(a as usize % ALIGN, 0);
            a.write_bytes(0xaa, 24);
            b.write_bytes(0xbb, 24);
            cache.dealloc(a, l);
            // The freed block comes back for any size of its class; the live one is untouched.
            let c = cache.alloc(Layout::from_size_align(32, 16).unwrap());
            assert_eq!(c, a);
            assert!((0..24).all(|i| *b.add(i) == 0xbb));
            // Grown within its class: the same block; past it: moved, contents kept.
            c.write_bytes(0xcc, 32);
            let l32 = Layout::from_size_align(32, 16).unwrap();
            assert_eq!(cache.realloc(c, l32, 20), c);
            let d = cache.realloc(c, Layout::from_size_align(20, 16).unwrap(), 300);
            assert_ne!(d, c);
            assert!((0..20).all(|i| *d.add(i) == 0xcc));
            cache.dealloc(d, Layout::from_size_align(300, 16).unwrap());
            // Large and over-aligned requests bypass the cache, and come back.
            let big = Layout::from_size_align(MAX_CACHED + 1, 8).unwrap();
            let e = cache.alloc(big);
            e.write_bytes(1, MAX_CACHED + 1);
            cache.dealloc(e, big);
            let aligned = Layout::from_size_align(64, 64).unwrap();
            let f = cache.alloc(aligned);
            assert_eq!(f as usize % 64, 0);
            cache.dealloc(f, aligned);
            cache.dealloc(b, l);
            // Blocks cached in the test's own `Cache` are leaked when it goes: fine in a test.
        }
    }
}
