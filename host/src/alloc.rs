//! The process allocator: mimalloc, through its plain entry points wherever they give the
//! alignment asked for. The `mimalloc` crate calls `mi_malloc_aligned` for every allocation, whose
//! fast path serves only blocks up to 1 KiB that happen to be aligned; past it, mimalloc 3
//! over-allocates any block whose size is not a power of two. 18 of a chat request's 125
//! allocations took that slow path, 14 of them over-allocated (BENCHMARKS.md §25). As `std`'s `System` allocator does with
//! `malloc`, an alignment that `mi_malloc` gives anyway goes to `mi_malloc`.

// A global allocator is unsafe by its trait; this module is the whole of it.
#![allow(unsafe_code)]

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// What `mi_malloc` aligns every block to (`MI_MAX_ALIGN_SIZE`, C's `max_align_t`: on 64-bit
/// targets its bins are whole double words), except one-word blocks, hence `align <= size`.
const MIN_ALIGN: usize = 16;

pub struct MiMalloc;

fn plain(align: usize, size: usize) -> bool {
    align <= MIN_ALIGN && align <= size
}

// SAFETY: every block comes from mimalloc with at least the layout's alignment, and is freed or
// resized by mimalloc (`mi_free` and `mi_realloc*` take blocks from either entry point).
unsafe impl GlobalAlloc for MiMalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            mi::mi_malloc(layout.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.align(), layout.size()) {
            mi::mi_zalloc(layout.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr as *mut c_void);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(layout.align(), new_size) {
            mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
        } else {
            mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
        }
    }
}

/// Free what this thread's heap holds unused, and return every arena's freed pages to the OS now
/// rather than at the allocator's next use after its purge delay.
pub fn release() {
    // SAFETY: takes no pointers; callable from any thread at any time.
    unsafe { mi::mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_asked_for_and_keep_their_bytes() {
        let a = MiMalloc;
        for align in [1, 2, 4, 8, 16, 32, 64, 128, 4096] {
            for size in [
                1, 3, 8, 15, 16, 17, 24, 40, 48, 80, 100, 1000, 1025, 2100, 70_000,
            ] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // Several live blocks of a size, so that a block placed off the alignment
                // would show.
                let held: Vec<*mut u8> = (0..6).map(|_| unsafe { a.alloc(layout) }).collect();
                for &p in &held {
                    assert_eq!(p as usize % align, 0, "alloc {size} / {align}");
                }
                unsafe {
                    let p = a.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "alloc {size} / {align}");
                    std::ptr::write_bytes(p, 0xab, size);
                    let grown = size * 3 + 5;
                    let q = a.realloc(p, layout, grown);
                    assert_eq!(q as usize % align, 0, "realloc {size} → {grown} / {align}");
                    assert!((0..size).all(|i| *q.add(i) == 0xab), "bytes kept");
                    a.dealloc(q, Layout::from_size_align(grown, align).unwrap());
                    let z = a.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0, "zeroed {size} / {align}");
                    assert!((0..size).all(|i| *z.add(i) == 0), "zeroed");
                    a.dealloc(z, layout);
                    for p in held {
                        a.dealloc(p, layout);
                    }
                }
            }
        }
    }
}
