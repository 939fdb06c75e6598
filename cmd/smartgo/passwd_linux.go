package main

import "golang.org/x/sys/unix"

// The ioctl requests that read and set a terminal's attributes (echo).
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)
