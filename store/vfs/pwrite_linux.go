package vfs

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pwrite writes all of b at off in f, as f.WriteAt does, but with raw
// pwrite(2) calls made inside f's syscall.RawConn: the calling goroutine
// does not enter the scheduler's system call state. A pwrite of a batch
// of records into the page cache (the store's write-behind buffer) easily
// outlasts a tick of the runtime's monitor (sysmon, 20 µs): through
// f.WriteAt the monitor then hands the caller's P to another thread (a
// futex wake-up and a thread switch) and keeps polling every 20 µs
// instead of backing off. The remoting layer's socket calls are raw for
// the same reason (remoting/sock_linux.go). A pwrite to a regular file
// copies into the page cache and waits for no disk, so the P is held
// for about as long as the copy takes.
func pwrite(f *os.File, b []byte, off int64) (int, error) {
	return rawWrite(f, len(b), func(fd uintptr, n int) (uintptr, syscall.Errno) {
		w, _, e := unix.RawSyscall6(unix.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
		return w, e
	}, func() (int, error) { return f.WriteAt(b, off) })
}

// pwriteZeros writes b and zeros zero bytes at off, as pwrite would
// write them appended, with raw pwritev(2) calls: the zeros come from a
// shared buffer and are not copied into b's.
func pwriteZeros(f *os.File, b []byte, zeros int, off int64) (int, error) {
	if zeros <= 0 || len(b) == 0 {
		return pwrite(f, append(b[:len(b):len(b)], zeroBuf[:max(zeros, 0)]...), off)
	}
	return rawWrite(f, len(b)+zeros, func(fd uintptr, n int) (uintptr, syscall.Errno) {
		var iov [2]unix.Iovec
		cnt := 1
		if n < len(b) {
			iov[0].Base = &b[n]
			iov[0].SetLen(len(b) - n)
			iov[1].Base = &zeroBuf[0]
			iov[1].SetLen(zeros)
			cnt = 2
		} else {
			iov[0].Base = &zeroBuf[0]
			iov[0].SetLen(len(b) + zeros - n)
		}
		at := off + int64(n)
		w, _, e := unix.RawSyscall6(unix.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(cnt), uintptr(at), uintptr(at>>32), 0)
		return w, e
	}, func() (int, error) { return f.WriteAt(append(b[:len(b):len(b)], zeroBuf[:zeros]...), off) })
}

// rawWrite makes write's system call inside f's syscall.RawConn until
// total bytes are written (write is told how many are), or fails;
// without a RawConn it is fallback.
func rawWrite(f *os.File, total int, write func(fd uintptr, n int) (uintptr, syscall.Errno), fallback func() (int, error)) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return fallback()
	}
	n := 0
	var errno syscall.Errno
	err = rc.Write(func(fd uintptr) bool {
		for n < total {
			w, e := write(fd, n)
			switch {
			case e == unix.EINTR:
				continue
			case e != 0:
				errno = e
				return true
			case w == 0:
				errno = unix.EIO // no progress
				return true
			}
			n += int(w)
		}
		return true
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return n, nil
}
