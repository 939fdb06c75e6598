// Package testnet holds network helpers for tests that start SmartGo
// processes on loopback.
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePorts returns n loopback ports such that each port and port+1 (a
// broker's HA port) are free and no two of these 2n ports coincide. Every
// candidate stays bound until all are chosen, so one call cannot hand out
// another's HA port.
//
// The ports lie below the kernel's ephemeral range when there is room
// (see fixedRange): a test that kills a process and starts it again on
// the same ports needs them free again, and a port of the ephemeral range
// may meanwhile have become the local end of any outgoing connection on
// the machine. Linux's connect() prefers even ports and bind(0) odd ones,
// so the HA port next to a port the kernel picked was the likeliest to be
// taken ("bind: address already in use" at the restart, seen under load).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	lo, hi, fixed := fixedRange()
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		addr := "127.0.0.1:0"
		if fixed && tries < 100*n {
			addr = "127.0.0.1:" + strconv.Itoa(lo+rand.IntN(hi-lo))
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			if addr != "127.0.0.1:0" {
				continue // taken: draw another
			}
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

// fixedLow is the lowest port FreePorts draws: above the well-known
// defaults a developer's own SmartGo, Redis or MQTT broker may hold
// (1883, 6379, 8080, 9876, 10911, 10912).
const fixedLow = 20000

// fixedRange returns the ports [lo, hi) below the ephemeral range
// (net.ipv4.ip_local_port_range), leaving room for port+1; ok is false
// when the range cannot be read or leaves fewer than 1000 ports.
func fixedRange() (lo, hi int, ok bool) {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data))
	if len(f) != 2 {
		return 0, 0, false
	}
	ephemeralLow, err := strconv.Atoi(f[0])
	if err != nil || ephemeralLow-1-fixedLow < 1000 {
		return 0, 0, false
	}
	return fixedLow, ephemeralLow - 1, true
}
