//! Memory of the big, short-lived arrays of counting and training: how they are allocated, and
//! what the process holds (for the timing report), and the one prefetch hint the tables use.
//! Figures: [log](../docs/performance.md#memory-of-the-merge-loop).

/// Asks for the cache line holding `p` (a hint: it never faults or writes, whatever the
/// address; nothing on other targets).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is only a hint; it never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// While alive, glibc serves every allocation of 1 MiB or more by its own mapping, so a freed
/// array goes back to the system at once and a growing one is moved by `mremap`, not copied.
/// By default glibc raises that threshold up to 32 MiB after a big block is freed (the
/// counting tables are); then the gathered counts and the merge loop's vectors live in its
/// heaps, where freed blocks stay resident (a pool thread's heap is never trimmed) and every
/// doubling leaves its old copy behind as a hole. On drop the threshold is set to 32 MiB,
/// where glibc's own adjustment would have taken it (so the process's other large
/// allocations, e.g. Python's or the file reader's blocks, stay cheap). On creation, the free
/// memory of every heap is given back first ([`trim`]): what the phase before freed there.
pub struct MapBigAllocations;

impl MapBigAllocations {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        set_mmap_threshold(1 << 20);
        trim();
        MapBigAllocations
    }
}

impl Drop for MapBigAllocations {
    fn drop(&mut self) {
        set_mmap_threshold(32 << 20);
    }
}

/// Gives the free memory of every heap back to the system (glibc keeps what a pool thread's
/// heap freed, and the arrays of the phase before are freed by then).
fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator's heaps to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn set_mmap_threshold(bytes: i32) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes the allocator's tuning; M_MMAP_THRESHOLD takes a size.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = bytes;
}

/// The system's memory page size (4 KiB on x86-64; 16 or 64 KiB on some arm64 and ppc64 kernels).
pub fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        #[cfg(unix)]
        // SAFETY: sysconf only reads a system setting.
        let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        #[cfg(not(unix))]
        let n = 4096;
        if n > 0 { n as usize } else { 4096 }
    })
}

/// Types for which all-zero bytes are a valid value (what given-back pages read as).
///
/// # Safety
/// Every bit pattern of zeros must be a valid value of the type.
pub unsafe trait Zeroable: Copy {}

// SAFETY: integers.
unsafe impl Zeroable for u8 {}
unsafe impl Zeroable for u64 {}
unsafe impl Zeroable for i64 {}

/// Gives the whole pages inside `buf` back to the system: its contents are no longer needed
/// (they read as zeros afterwards). For the dead parts of one big array whose live parts stay.
pub fn release_pages<T: Zeroable>(buf: &mut [T]) {
    let page = page_size();
    let (p, n) = (buf.as_mut_ptr() as usize, std::mem::size_of_val(buf));
    let (lo, hi) = (p.div_ceil(page) * page, (p + n) / page * page);
    if hi <= lo {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: [lo, hi) lies inside `buf`, which this call borrows mutably: no other reference
    // sees the bytes, and MADV_DONTNEED on private memory only turns them into zeros, a valid
    // value of `T`.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_DONTNEED);
    }
}

/// The resident memory of this process and its peak, in MiB, for the timing report (0 where
/// unknown).
pub fn rss_mib() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = |k: &str| {
        status.lines().find(|l| l.starts_with(k)).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()).unwrap_or(0)
    };
    format!("{} MiB (peak {} MiB)", kb("VmRSS:") >> 10, kb("VmHWM:") >> 10)
}
