//! Memory for the cache tables. A big table (>= 4 MiB) is its own anonymous mapping, 2 MiB
//! aligned and advised to use huge pages before anything touches it (with THP in `madvise`
//! mode nothing happens without asking); smaller ones, and any the system will not map, are a
//! boxed slice. A warm short table is 8-32 MB: with 4 KiB pages a lookup may also miss the TLB,
//! and a page walk is something a prefetch has to wait for; with 2 MiB pages the whole table
//! fits the second-level TLB. Not a `Vec` with the advice: malloc serves such sizes from memory
//! it already had, whose pages are faulted in 4 KiB at a time ([log](../../docs/performance.md#word-cache)).
//! The kernel's zero pages also make a new table free until it is written.

/// `len` default (all-zero) values of `T`: a boxed slice, or for big ones their own huge-page
/// mapping (see the module doc).
pub struct Slots<T> {
    ptr: *mut T,
    len: usize,
    /// The mapping (start, length) when mapped, else the slice is a `Box<[T]>`.
    map: Option<(usize, usize)>,
}

// SAFETY: `Slots` owns its memory exclusively, like a `Box<[T]>`.
unsafe impl<T: Send> Send for Slots<T> {}
unsafe impl<T: Sync> Sync for Slots<T> {}

impl<T: Copy + Default> Slots<T> {
    /// `len` values of `T::default()`.
    ///
    /// # Safety
    /// All-zero bytes must be a valid `T` equal to `T::default()` (true of the table entries:
    /// zero keys, zero ids, no padding), because a mapped slice is the kernel's zero pages.
    pub unsafe fn zeroed(len: usize) -> Self {
        #[cfg(target_os = "linux")]
        {
            const HUGE: usize = 2 << 20;
            let bytes = len * std::mem::size_of::<T>();
            if bytes >= 2 * HUGE {
                let map_len = bytes + HUGE;
                // SAFETY: a fresh private anonymous mapping (zero-filled), checked for failure;
                // the aligned range lies inside it; madvise only changes how it is backed.
                unsafe {
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        map_len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                        -1,
                        0,
                    );
                    if p != libc::MAP_FAILED {
                        let start = (p as usize + HUGE - 1) & !(HUGE - 1);
                        libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
                        return Slots { ptr: start as *mut T, len, map: Some((p as usize, map_len)) };
                    }
                }
            }
        }
        let b: Box<[T]> = vec![T::default(); len].into_boxed_slice();
        Slots { ptr: Box::into_raw(b) as *mut T, len, map: None }
    }
}

impl<T: Copy + Default> Slots<T> {
    /// Whether this is its own mapping (then [`Self::grow_in_place`] can work).
    pub fn is_mapped(&self) -> bool {
        self.map.is_some()
    }

    /// Grows a mapped slice to `new_len` values (a multiple of 2 MiB of them in bytes), keeping
    /// its pages: they move to a new 2 MiB-aligned range (`mremap`, page tables moved, nothing
    /// copied) and only the added part is new memory, zero until written. Here first-touched
    /// memory is the cost of a growth (a freed table's pages go back to the host, see
    /// [log](../../docs/performance.md#the-miss-path)): the copying growth touched old + new.
    /// False (nothing changed) when the slice is not mapped or the system refuses.
    pub fn grow_in_place(&mut self, new_len: usize) -> bool {
        #[cfg(target_os = "linux")]
        {
            const HUGE: usize = 2 << 20;
            let (size, old) = (std::mem::size_of::<T>(), self.len * std::mem::size_of::<T>());
            let bytes = new_len * size;
            let Some((map_start, map_len)) = self.map else { return false };
            if new_len <= self.len || bytes % HUGE != 0 || old % HUGE != 0 {
                return false;
            }
            // SAFETY: a fresh reservation (checked), an aligned range inside it; the moved range
            // is this slice's own pages (old bytes from `ptr`, inside its mapping); what is left
            // of the old mapping and of the reservation is unmapped, nothing else is touched.
            unsafe {
                let res_len = bytes + HUGE;
                let r = libc::mmap(std::ptr::null_mut(), res_len, libc::PROT_NONE,
                                   libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0);
                if r == libc::MAP_FAILED {
                    return false;
                }
                let start = (r as usize + HUGE - 1) & !(HUGE - 1);
                let moved = libc::mremap(self.ptr as *mut libc::c_void, old, bytes,
                                         libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, start as *mut libc::c_void);
                if moved == libc::MAP_FAILED {
                    libc::munmap(r, res_len);
                    return false;
                }
                let unmap = |a: usize, b: usize| {
                    if b > a {
                        libc::munmap(a as *mut libc::c_void, b - a);
                    }
                };
                unmap(r as usize, start); // the reservation around the new range
                unmap(start + bytes, r as usize + res_len);
                unmap(map_start, self.ptr as usize); // the old mapping's slack around the moved pages
                unmap(self.ptr as usize + old, map_start + map_len);
                libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
                // (Not an assignment: the old value's drop would unmap its range again, which
                // another thread may have mapped since.)
                std::ptr::write(self, Slots { ptr: start as *mut T, len: new_len, map: Some((start, bytes)) });
            }
            true
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = new_len;
            false
        }
    }
}

impl<T> std::ops::Deref for Slots<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialized values (zero bytes are a valid `T`, see `zeroed`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T> std::ops::DerefMut for Slots<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        match self.map {
            #[cfg(target_os = "linux")]
            Some((start, len)) => {
                // SAFETY: the mapping made in `zeroed`, unmapped once.
                unsafe { libc::munmap(start as *mut libc::c_void, len) };
            }
            #[cfg(not(target_os = "linux"))]
            Some(_) => unreachable!(),
            // SAFETY: made by `Box::into_raw` of a `Box<[T]>` of `len` values in `zeroed`.
            None => drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr, self.len)) }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::Entry;

    #[test]
    fn table_slots_are_zeroed_writable_and_freed() {
        for len in [0usize, 1, 1000, (8 << 20) / 32] {
            // SAFETY: an all-zero `Entry<u128>` is its default.
            let mut s: Slots<Entry<u128>> = unsafe { Slots::zeroed(len) };
            assert_eq!(s.len(), len);
            assert!(s.iter().all(|e| e.key == 0 && e.val == [0; 4]));
            if len > 0 {
                s[len - 1] = Entry { key: 7, val: [1, 2, 3, 4] };
                assert_eq!(s[len - 1].val, [1, 2, 3, 4]);
            }
            // A big one is its own 2 MiB-aligned mapping.
            assert_eq!(s.map.is_some(), cfg!(target_os = "linux") && len * 32 >= 4 << 20);
            if s.map.is_some() {
                assert_eq!(s.as_ptr() as usize % (2 << 20), 0);
            }
        }
    }
}
