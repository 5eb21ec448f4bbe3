//! User-space consumer of a `BPF_MAP_TYPE_RINGBUF` map (Linux 5.8), by mmap.
//!
//! Memory protocol (kernel/bpf/ringbuf.c, `struct bpf_ringbuf` and `ringbuf_map_mmap_kern`/`_user`):
//! the first page of the mapping holds `consumer_pos` and is writable by us; the next page holds
//! `producer_pos` (read-only), followed by the data area mapped twice in a row so a record that
//! wraps reads contiguously. Each record starts with an 8-byte header: `u32 len` whose bit 31
//! (`BPF_RINGBUF_BUSY_BIT`) says "still being written" and bit 30 (`BPF_RINGBUF_DISCARD_BIT`) says
//! "discarded", then `u32 pg_off`. Records are 8-byte aligned. The producer publishes with
//! `smp_store_release` on the header and on `producer_pos`; we read both with acquire loads and
//! advance `consumer_pos` with a release store, pairing with `__bpf_ringbuf_reserve`'s read of it.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use probe_sys::SyscallError;

const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_SZ: u64 = 8;

/// An mmap'd ring buffer plus an epoll instance waiting on it.
#[derive(Debug)]
pub struct RingBuf {
    consumer: *mut u8,
    producer: *mut u8,
    data_size: u64,
    page: usize,
    epoll: OwnedFd,
    map: OwnedFd,
}

impl RingBuf {
    /// The ring buffer map's descriptor (to pin it).
    pub fn map_fd(&self) -> &OwnedFd {
        &self.map
    }

    /// Maps the ring buffer `map` whose data area is `data_size` bytes (the map's `max_entries`).
    pub fn new(map: OwnedFd, data_size: u32) -> Result<RingBuf, SyscallError> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let fd = map.as_raw_fd();
        // SAFETY: mapping a fresh region (addr null) of one page at offset 0 of the ring-buffer map
        // fd; the kernel allows RW for the consumer page only.
        let consumer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if consumer == libc::MAP_FAILED {
            return Err(SyscallError::last("mmap(ringbuf consumer)"));
        }
        let plen = page + 2 * data_size as usize;
        // SAFETY: a fresh read-only region over the producer page and the double-mapped data area,
        // the exact layout ringbuf_map_mmap_user permits.
        let producer = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                plen,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                page as libc::off_t,
            )
        };
        if producer == libc::MAP_FAILED {
            let err = std::io::Error::last_os_error();
            // SAFETY: unmapping the region mapped just above, which nothing else references.
            unsafe { libc::munmap(consumer, page) };
            return Err(SyscallError::new("mmap(ringbuf producer)", err));
        }
        // SAFETY: epoll_create1 has no memory preconditions.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(SyscallError::last("epoll_create1"));
        }
        // SAFETY: the kernel returned this descriptor and nothing else owns it.
        let epoll = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(ep) };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: 0,
        };
        // SAFETY: `ev` is a valid epoll_event; both fds are open.
        if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(SyscallError::last("epoll_ctl(ringbuf)"));
        }
        Ok(RingBuf {
            consumer: consumer as *mut u8,
            producer: producer as *mut u8,
            data_size: data_size as u64,
            page,
            epoll,
            map,
        })
    }

    /// Waits up to `timeout_ms` for data (0 = just check). Interrupted waits (EINTR) return
    /// `Ok(false)` so a signal handler's flag can be checked.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, SyscallError> {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: one valid epoll_event to fill; the epoll fd is open.
        let n = unsafe { libc::epoll_wait(self.epoll.as_raw_fd(), &mut ev, 1, timeout_ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(SyscallError::new("epoll_wait(ringbuf)", e));
        }
        Ok(n > 0)
    }

    /// Hands every record committed when it starts to `f` (in order) and frees their space.
    /// Returns how many. One pass up to the producer position read at the start: records that
    /// arrive meanwhile wait for the next call, so a producer faster than `f` cannot keep the
    /// consumer here for ever (it returns to check for `exit()`, a full `fill` buffer, signals).
    pub fn consume(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        // SAFETY: both positions are naturally aligned u64s at the start of pages we mapped; the
        // kernel updates them concurrently, hence atomics.
        let cons_pos = unsafe { &*(self.consumer as *const AtomicU64) };
        // SAFETY: as above, for the producer page.
        let prod_pos = unsafe { &*(self.producer as *const AtomicU64) };
        // SAFETY: the data area starts one page after producer_pos and spans 2 * data_size bytes.
        let data = unsafe { self.producer.add(self.page) };
        let mask = self.data_size - 1;
        let mut n = 0;
        let mut cons = cons_pos.load(Ordering::Acquire);
        let prod = prod_pos.load(Ordering::Acquire);
        while cons < prod {
            // SAFETY: `cons & mask` < data_size, so the 4-byte header lies in the mapping and is
            // 8-aligned; the producer writes it with smp_store_release.
            let hdr = unsafe { &*(data.add((cons & mask) as usize) as *const AtomicU32) };
            let len = hdr.load(Ordering::Acquire);
            if len & BUSY_BIT != 0 {
                cons_pos.store(cons, Ordering::Release);
                return n;
            }
            let size = (len & !(BUSY_BIT | DISCARD_BIT)) as u64;
            if len & DISCARD_BIT == 0 {
                // SAFETY: a committed record of `size` bytes follows its header; the data area is
                // mapped twice, so [off + 8, off + 8 + size) is readable even when it wraps.
                let rec = unsafe {
                    std::slice::from_raw_parts(
                        data.add((cons & mask) as usize + HDR_SZ as usize),
                        size as usize,
                    )
                };
                f(rec);
                n += 1;
            }
            cons += (size + HDR_SZ + 7) & !7;
            cons_pos.store(cons, Ordering::Release);
        }
        n
    }
}

impl Drop for RingBuf {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the two regions mapped in `new`; no references outlive self.
        unsafe {
            libc::munmap(self.consumer as *mut libc::c_void, self.page);
            libc::munmap(
                self.producer as *mut libc::c_void,
                self.page + 2 * self.data_size as usize,
            );
        }
    }
}
