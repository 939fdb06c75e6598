package main

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestCmdMQTTPortNamesTLSAndHTTP: a TLS client (a device configured for
// port 8883) or an HTTP client at the plain MQTT port is logged as such;
// the line said only "CONNECT: invalid fixed header flags 0x6", the first
// byte of a TLS record read as an MQTT header. (One standalone each: the
// second malformed CONNECT within 10 s would be rate-limited.)
func TestCmdMQTTPortNamesTLSAndHTTP(t *testing.T) {
	t.Run("TLS", func(t *testing.T) {
		logs, addrs := standalone(t)
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addrs["mqtt"], &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			tc.Close()
			t.Fatal("a TLS handshake with the plain MQTT port succeeded")
		}
		testutil.WaitFor(t, 10*time.Second, "the TLS client logged", func() bool {
			return strings.Contains(logs.String(), "a TLS handshake: a TLS client at a plain MQTT port?")
		})
	})
	t.Run("HTTP", func(t *testing.T) {
		logs, addrs := standalone(t)
		c, err := net.Dial("tcp", addrs["mqtt"])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		testutil.WaitFor(t, 10*time.Second, "the HTTP client logged", func() bool {
			return strings.Contains(logs.String(), "an HTTP request, not MQTT")
		})
	})
}
