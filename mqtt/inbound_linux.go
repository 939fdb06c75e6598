package mqtt

import "golang.org/x/sys/unix"

// sysInq is the number of bytes waiting in the socket's receive queue,
// -1 when unknown.
func sysInq(fd int) int {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	if err != nil {
		return -1
	}
	return n
}
