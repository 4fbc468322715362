//! Model files mapped into memory instead of read, safely when another process rewrites or
//! truncates the file while the mapping is in use (Linux only; elsewhere, and wherever a
//! condition below fails, the caller reads the file instead).
//!
//! A plain file mapping is unsafe for a loader: a truncated file kills the reader with
//! SIGBUS on the next touch of a page past the new end, and a file rewritten in place shows
//! its new bytes through a `MAP_PRIVATE` mapping too (pages not yet copied on write read the
//! page cache). [`map_file`] therefore maps only a file on which it holds a read **lease**
//! (`fcntl(F_SETLEASE, F_RDLCK)`):
//!
//! * The kernel grants a read lease only while nobody has the file open for writing (a
//!   writable shared mapping counts): otherwise `EAGAIN`, and the caller reads the file.
//! * Every later change needs a new writable `open` or a `truncate`, and each of those first
//!   *breaks* the lease: the kernel signals the holder and blocks the writer until the holder
//!   releases the lease (or `/proc/sys/fs/lease-break-time` seconds pass, 45 by default).
//! * On the break, the **keeper thread** copies each breaking mapping into anonymous memory and
//!   puts the copy at the same address in one `mremap(MREMAP_FIXED)` (atomic for every other
//!   thread: a reader sees the file's page or the copy's, with the same bytes), then releases
//!   the lease. The writer proceeds; the mapping no longer depends on the file.
//!
//! The break signal is a real-time signal that nobody else handles (the highest one whose
//! disposition is the default when the keeper starts), so no other library's or Python's
//! handler is replaced or chained. Each lease is pointed at the keeper thread alone
//! (`F_SETOWN_EX`, `F_OWNER_TID`); the keeper blocks the signal and takes it with
//! `sigwaitinfo`, so the copy runs as ordinary code, not in a signal handler, and the other
//! threads' signal masks do not matter. Only for the moment between `F_SETLEASE` (which points
//! the lease at the whole process) and `F_SETOWN_EX` can a break signal reach another thread:
//! a handler installed for that signal forwards it to the keeper (`tgkill`, async-signal-safe).
//!
//! Only files on local file systems whose leases see every writer are mapped (ext2/3/4, XFS,
//! btrfs, F2FS, tmpfs): not NFS or other network file systems (a writer on another machine
//! breaks no local lease) nor overlayfs (a write to a lower layer bypasses the overlay inode).
//! A lease needs the caller to own the file (or `CAP_LEASE`): `EACCES` falls back to reading.
//! The file's size is checked again once the lease is held.
//!
//! Limits, stated: a process stopped (SIGSTOP, a debugger) for longer than the lease-break
//! time loses the lease and is unprotected. A child of `fork` shares its parent's lease while
//! the parent holds it, but after a break only the parent's mapping is copied: a forked child
//! that keeps using a module while its model file is rewritten can see the new bytes or get
//! SIGBUS (`PASSEL_ONNX_READ=1` makes every load read the file instead).
//!
//! # Safety argument
//! All `unsafe` code of the importer is in this module. A [`Mapping`] owns `len` bytes at
//! `addr`, mapped read-only by [`map_file`] and unmapped only by its `Drop`, so the slice
//! handed out by `as_ref` is valid while any `Bytes` owner lives. The bytes never change: the
//! lease is held (checked under the registry lock after it was taken) from before the first
//! read until the keeper has replaced the file pages by an identical anonymous copy, and the
//! copy is read-only. The keeper copies and `Drop` unmaps under the same lock, so a mapping is
//! never unmapped during its copy, and the copy is never put at an address already unmapped
//! (and perhaps reused). The copy's `memcpy` reads the file pages while the writer is still
//! blocked by the lease.

use std::fs::File;
use std::io;

use bytes::Bytes;

/// Files smaller than this are read: a read of a small file is cheap, a mapping costs a file
/// descriptor and a lease for the module's lifetime.
pub const MIN_MAP_BYTES: u64 = 1 << 20;

/// Why a file was not mapped ([`map_file`]); the caller reads it instead.
#[derive(Debug, thiserror::Error)]
pub enum NotMapped {
    /// `PASSEL_ONNX_READ` is set (to anything but `0`).
    #[error("PASSEL_ONNX_READ is set")]
    Disabled,
    /// Mapping is implemented for Linux only.
    #[error("file mappings are used on Linux only")]
    Unsupported,
    /// The file is smaller than [`MIN_MAP_BYTES`].
    #[error("the file is smaller than {MIN_MAP_BYTES} bytes")]
    Small,
    /// The file system's leases do not cover every writer (or its type is unknown).
    #[error("leases on this file system (type {0:#x}) do not see every writer")]
    FileSystem(i64),
    /// Somebody has the file open for writing (`F_SETLEASE` said `EAGAIN`).
    #[error("the file is open for writing")]
    OpenForWriting,
    /// The lease was refused for another reason (`EACCES`: another user's file).
    #[error("no read lease: {0}")]
    Lease(io::Error),
    /// The file changed size, or its lease was broken, before it was mapped.
    #[error("the file changed while it was being mapped")]
    Changed,
    /// `mmap` failed, or the keeper thread could not be started.
    #[error("{0}")]
    Map(io::Error),
}

/// Maps `file` (open for reading, a regular file of `len` bytes) read-only for as long as any
/// clone of the returned `Bytes` lives, protected by a read lease as the module doc describes.
pub fn map_file(file: &File, len: u64) -> Result<Bytes, NotMapped> {
    if std::env::var_os("PASSEL_ONNX_READ").is_some_and(|v| v != "0") {
        return Err(NotMapped::Disabled);
    }
    if len < MIN_MAP_BYTES {
        return Err(NotMapped::Small);
    }
    #[cfg(target_os = "linux")]
    {
        linux::map(file, len)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        Err(NotMapped::Unsupported)
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
    use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
    use std::sync::{Mutex, MutexGuard, OnceLock};

    use bytes::Bytes;
    use libc::{c_int, c_void};

    use super::NotMapped;

    // fcntl commands and types the libc crate does not define for glibc (linux/fcntl.h).
    const F_SETSIG: c_int = 10;
    const F_SETOWN_EX: c_int = 15;
    const F_OWNER_TID: c_int = 0;

    #[repr(C)]
    struct FOwnerEx {
        kind: c_int,
        pid: libc::pid_t,
    }

    /// The file systems whose leases are broken by every local writer.
    fn lease_safe_fs(kind: libc::c_long) -> bool {
        [
            libc::EXT4_SUPER_MAGIC,
            libc::XFS_SUPER_MAGIC,
            libc::BTRFS_SUPER_MAGIC,
            libc::F2FS_SUPER_MAGIC,
            libc::TMPFS_MAGIC,
        ]
        .contains(&kind)
    }

    /// One live mapping: `fd` holds its lease (`-1` once the keeper has copied it).
    struct Entry {
        id: u64,
        fd: RawFd,
        addr: usize,
        len: usize,
    }

    static MAPS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
    static NEXT_ID: AtomicU64 = AtomicU64::new(0);
    /// The keeper's thread id and signal, for the forwarding handler (0 until started).
    static KEEPER_TID: AtomicI32 = AtomicI32::new(0);
    static KEEPER_SIG: AtomicI32 = AtomicI32::new(0);
    static KEEPER: OnceLock<Result<(), String>> = OnceLock::new();

    fn maps() -> MutexGuard<'static, Vec<Entry>> {
        MAPS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn errno() -> io::Error {
        io::Error::last_os_error()
    }

    /// Forwards a break signal that reached another thread to the keeper (only possible
    /// between `F_SETLEASE` and `F_SETOWN_EX`). Async-signal-safe: atomics and syscalls only.
    extern "C" fn forward(sig: c_int, _info: *mut libc::siginfo_t, _ctx: *mut c_void) {
        let tid = KEEPER_TID.load(Ordering::Acquire);
        if tid != 0 {
            // SAFETY: getpid and tgkill are async-signal-safe syscalls without memory arguments.
            unsafe {
                let saved = *libc::__errno_location();
                libc::tgkill(libc::getpid(), tid, sig);
                *libc::__errno_location() = saved;
            }
        }
    }

    /// Starts the keeper thread once: picks a free real-time signal, spawns the thread (which
    /// blocks the signal and waits for it), then installs the forwarding handler.
    fn keeper() -> Result<(), NotMapped> {
        let started = KEEPER.get_or_init(|| {
            let sig = (libc::SIGRTMIN()..=libc::SIGRTMAX())
                .rev()
                .find(|&s| {
                    // SAFETY: sigaction with a null new action only reads the disposition.
                    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
                    unsafe { libc::sigaction(s, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL }
                })
                .ok_or("every real-time signal is in use")?;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("passel-lease-keeper".into())
                .spawn(move || {
                    // SAFETY: sigset and mask calls on a local set; gettid has no arguments.
                    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
                    unsafe {
                        libc::sigemptyset(&mut set);
                        libc::sigaddset(&mut set, sig);
                        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
                    }
                    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
                    let _ = tx.send(tid);
                    loop {
                        // SAFETY: waits for the blocked signal; the info is not needed.
                        if unsafe { libc::sigwaitinfo(&set, std::ptr::null_mut()) } == sig {
                            copy_breaking();
                        }
                    }
                })
                .map_err(|e| format!("cannot start the lease keeper thread: {e}"))?;
            let tid = rx.recv().map_err(|_| "the lease keeper thread did not start")?;
            KEEPER_TID.store(tid, Ordering::Release);
            KEEPER_SIG.store(sig, Ordering::Release);
            // SAFETY: installs `forward` (async-signal-safe) for a signal nobody else handles.
            let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
            action.sa_sigaction = forward as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            unsafe { libc::sigemptyset(&mut action.sa_mask) };
            if unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) } != 0 {
                return Err(format!("cannot install the lease signal handler: {}", errno()));
            }
            Ok(())
        });
        started.clone().map_err(|e| NotMapped::Map(io::Error::other(e)))
    }

    /// The keeper's work on a break signal: every mapping whose lease is breaking is copied
    /// into anonymous memory at the same address, then its lease is released.
    fn copy_breaking() {
        let mut maps = maps();
        for e in maps.iter_mut().filter(|e| e.fd >= 0) {
            // SAFETY: `e.fd` is open (closed only here or by the entry's removal, under the lock).
            if unsafe { libc::fcntl(e.fd, libc::F_GETLEASE) } == libc::F_RDLCK {
                continue;
            }
            match copy_in_place(e.addr, e.len) {
                Ok(()) => unsafe {
                    libc::fcntl(e.fd, libc::F_SETLEASE, libc::F_UNLCK);
                    libc::close(e.fd);
                    e.fd = -1;
                },
                // Keep the lease: the writer waits out the lease-break time.
                Err(err) => eprintln!("passel: cannot copy a mapped model file before it changes: {err}"),
            }
        }
    }

    /// Replaces the `len` mapped bytes at `addr` by an anonymous read-only copy, atomically.
    fn copy_in_place(addr: usize, len: usize) -> io::Result<()> {
        // SAFETY: a fresh anonymous mapping of `len` bytes; `addr..addr + len` is a live
        // read-only mapping (the caller holds the registry lock, so it is not unmapped), whose
        // bytes do not change while the lease is still held; mremap moves the copy over it.
        unsafe {
            let copy = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if copy == libc::MAP_FAILED {
                return Err(errno());
            }
            std::ptr::copy_nonoverlapping(addr as *const u8, copy as *mut u8, len);
            let moved = if libc::mprotect(copy, len, libc::PROT_READ) != 0 {
                libc::MAP_FAILED
            } else {
                libc::mremap(copy, len, len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, addr as *mut c_void)
            };
            if moved == libc::MAP_FAILED {
                let err = errno();
                libc::munmap(copy, len);
                return Err(err);
            }
        }
        Ok(())
    }

    /// The owner of one mapping inside `Bytes`.
    struct Mapping {
        id: u64,
        addr: usize,
        len: usize,
    }

    impl AsRef<[u8]> for Mapping {
        fn as_ref(&self) -> &[u8] {
            // SAFETY: the module doc's argument: `len` unchanging bytes at `addr` until drop.
            unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            let mut maps = maps();
            if let Some(i) = maps.iter().position(|e| e.id == self.id) {
                let e = maps.swap_remove(i);
                // SAFETY: the mapping is this owner's; no slice of it outlives the last owner.
                unsafe {
                    libc::munmap(e.addr as *mut c_void, e.len);
                    if e.fd >= 0 {
                        libc::close(e.fd);
                    }
                }
            }
        }
    }

    /// Undoes a mapping that was not handed out: unmaps it, releases the lease, closes `fd`.
    fn undo(addr: *mut c_void, len: usize, fd: RawFd) {
        // SAFETY: `addr` was mapped by `map` and never handed out; `fd` is `map`'s own.
        unsafe {
            libc::munmap(addr, len);
            libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK);
            libc::close(fd);
        }
    }

    pub(super) fn map(file: &File, len: u64) -> Result<Bytes, NotMapped> {
        let len = usize::try_from(len).map_err(|_| NotMapped::Map(io::Error::other("the file is too large to map")))?;
        // SAFETY (all calls below): plain syscalls on `file`'s descriptor, a duplicate of it
        // owned here, and local out-parameters.
        let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } != 0 {
            return Err(NotMapped::Map(errno()));
        }
        if !lease_safe_fs(fs.f_type) {
            // `f_type` is a `c_long`: 32 bits on 32-bit targets.
            #[allow(clippy::unnecessary_cast)]
            return Err(NotMapped::FileSystem(fs.f_type as i64));
        }
        keeper()?;
        let sig = KEEPER_SIG.load(Ordering::Acquire);
        let tid = KEEPER_TID.load(Ordering::Acquire);
        // A descriptor of our own (same open file description), closed with the mapping.
        let fd = file.try_clone().map_err(NotMapped::Map)?.into_raw_fd();
        let close = |e| {
            unsafe { libc::close(fd) };
            Err(e)
        };
        if unsafe { libc::fcntl(fd, F_SETSIG, sig) } != 0 {
            return close(NotMapped::Map(errno()));
        }
        if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } != 0 {
            let err = errno();
            return close(match err.raw_os_error() {
                Some(libc::EAGAIN) => NotMapped::OpenForWriting,
                _ => NotMapped::Lease(err),
            });
        }
        let owner = FOwnerEx { kind: F_OWNER_TID, pid: tid };
        if unsafe { libc::fcntl(fd, F_SETOWN_EX, &owner as *const FOwnerEx) } != 0 {
            let err = errno();
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return close(NotMapped::Map(err));
        }
        // The size once the lease is held (a truncation before it would fault the mapping).
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_size as u64 != len as u64 {
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return close(NotMapped::Changed);
        }
        let addr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, fd, 0) };
        if addr == libc::MAP_FAILED {
            let err = errno();
            unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) };
            return close(NotMapped::Map(err));
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        {
            // Registered with the lease still unbroken, checked under the lock: a break before
            // the check undoes the mapping, one after it finds the entry in the keeper's scan.
            let mut maps = maps();
            if unsafe { libc::fcntl(fd, libc::F_GETLEASE) } != libc::F_RDLCK {
                drop(maps);
                undo(addr, len, fd);
                return Err(NotMapped::Changed);
            }
            maps.push(Entry { id, fd, addr: addr as usize, len });
        }
        Ok(Bytes::from_owner(Mapping { id, addr: addr as usize, len }))
    }

    pub(super) fn is_leased(bytes: &[u8]) -> bool {
        let start = bytes.as_ptr() as usize;
        maps().iter().any(|e| e.addr == start && e.fd >= 0)
    }
}

/// Whether `bytes` starts a live mapping of [`map_file`] that still holds its lease (false for
/// a read copy, and for a mapping the keeper has copied after a break).
pub fn is_leased(bytes: &[u8]) -> bool {
    #[cfg(target_os = "linux")]
    {
        linux::is_leased(bytes)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = bytes;
        false
    }
}

/// Maps `file` when [`map_file`] can, else reads it whole (`read`, given the file).
pub fn map_or_read(file: File, len: u64, read: impl FnOnce(File) -> io::Result<Vec<u8>>) -> io::Result<Bytes> {
    match map_file(&file, len) {
        Ok(bytes) => Ok(bytes),
        Err(_) => read(file).map(Bytes::from),
    }
}
