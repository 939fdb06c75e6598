// Package testnet holds network helpers for tests that start SmartGo
// processes on loopback.
package testnet

import (
	"net"
	"strconv"
	"testing"
)

// FreePorts returns n loopback ports such that each port and port+1 (a
// broker's HA port) are free and no two of these 2n ports coincide. Every
// candidate stays bound until all are chosen, so one call cannot hand out
// another's HA port.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		p := ln.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
		if err != nil {
			continue // p+1 taken (possibly by one of ours): keep p held, try another
		}
		held = append(held, ln2)
		ports = append(ports, p)
	}
	return ports
}
