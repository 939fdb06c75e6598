package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/registry"
)

// TestCmdWrongPortSaysWhatAnswered: an HTTP address given as a registry's
// (the console's, a metrics port, a proxy) fails saying the peer spoke
// HTTP; an HTTP request (a browser, Prometheus) or a TLS client at a
// registry's port is logged as such. Both used to say only "frame too
// large: 1213486164 bytes", which no user can act on.
func TestCmdWrongPortSaysWhatAnswered(t *testing.T) {
	// An HTTP server or proxy that answers at once.
	proxy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	go func() {
		for {
			c, err := proxy.Accept()
			if err != nil {
				return
			}
			go func() {
				// Read the request first and close only after the client
				// did: closing with unread bytes resets the connection,
				// which could discard the answer before the client reads it.
				defer c.Close()
				if _, err := c.Read(make([]byte, 1)); err != nil {
					return
				}
				c.Write([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	code, _, stderr := runCmd(t, "admin", "-registry", proxy.Addr().String(), "-timeout", "10s", "cluster")
	if code != exitFailure || !strings.Contains(stderr, "an HTTP response, not RocketMQ remoting") {
		t.Fatalf("admin against an HTTP server: exit %d: %s", code, stderr)
	}

	var logs testutil.LogBuffer
	r, err := registry.New(registry.Options{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, first := range []string{"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"} {
		c, err := net.Dial("tcp", r.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte(first))
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		bufio.NewReader(c).ReadByte() // until the registry closes it
		c.Close()
	}
	testutil.WaitFor(t, 10*time.Second, "both logged", func() bool {
		s := logs.String()
		return strings.Contains(s, "an HTTP request, not RocketMQ remoting") && strings.Contains(s, "a TLS handshake, not RocketMQ remoting")
	})
}

// TestCmdAdminNoMasterAnywhere: creating a topic when no broker group has
// a master (none registered yet, or all failing over) says so; it said
// `no master broker in cluster ""`.
func TestCmdAdminNoMasterAnywhere(t *testing.T) {
	r := startTestRegistry(t)
	code, _, stderr := runCmd(t, "admin", "-registry", r.Addr().String(), "topic", "create", "-t", "NoMasterT")
	if code != exitFailure || !strings.Contains(stderr, "no master broker in any cluster") || strings.Contains(stderr, `""`) {
		t.Fatalf("topic create with no master: exit %d: %s", code, stderr)
	}
}

// TestCmdAdminAtOtherPortsOfStandalone: admin given the address of a
// standalone's console (HTTP) or MQTT port for its registry's, or for a
// broker's, says what answered there and which ports it probably meant;
// given the registry's address for a broker's, it says it is a registry.
// It said only "request timed out: code 106" (a web server waits for the
// rest of a request line) or "connection closed: EOF" (an MQTT server
// drops a peer whose first bytes are no CONNECT).
func TestCmdAdminAtOtherPortsOfStandalone(t *testing.T) {
	_, addrs := standalone(t)
	for _, c := range []struct{ port, want string }{
		{"console", "answers HTTP: a web port (the console or a /metrics endpoint?), not RocketMQ remoting"},
		{"mqtt", "answers MQTT: an MQTT bridge's device port, not RocketMQ remoting"},
	} {
		addr := addrs[c.port]
		for _, args := range [][]string{
			{"admin", "-registry", addr, "-timeout", "2s", "cluster"},
			{"admin", "-registry", addrs["registry"], "-timeout", "2s", "broker", "config", "-b", addr},
		} {
			code, _, stderr := runCmd(t, args...)
			if code != exitFailure || !strings.Contains(stderr, addr+" "+c.want) || !strings.Contains(stderr, "registries listen on port 9876") {
				t.Errorf("%v: exit %d: %s", args, code, stderr)
			}
		}
	}
	// The registry's address given for a broker's: it said only "code 3:
	// request type 26 not supported".
	reg := addrs["registry"]
	code, _, stderr := runCmd(t, "admin", "-registry", reg, "-timeout", "30s", "broker", "config", "-b", reg)
	if code != exitFailure || !strings.Contains(stderr, reg+" is a registry, not a broker: brokers listen on port 10911") {
		t.Errorf("admin broker config -b <registry>: exit %d: %s", code, stderr)
	}
}

// TestCmdAdminAtHAPort: admin given a master broker's HA (replication)
// address for a broker's or a registry's says it is the HA port; it said
// only "connection closed: EOF" (the HA port drops a peer whose first
// bytes are no hello).
func TestCmdAdminAtHAPort(t *testing.T) {
	_, addrs := standalone(t)
	reg := addrs["registry"]
	a, err := admin.New(admin.Options{Registries: []string{reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ha string
	testutil.Eventually(t, 30*time.Second, func() error {
		masters, err := a.Masters(ctx, "")
		if err != nil {
			return err
		}
		info, err := a.BrokerRuntimeInfo(ctx, masters[0].Addr)
		if err != nil {
			return err
		}
		if ha = info["haServerAddr"]; ha == "" {
			return errors.New("no haServerAddr in the master's runtime info")
		}
		return nil
	})
	for _, args := range [][]string{
		{"admin", "-registry", ha, "-timeout", "5s", "cluster"},
		{"admin", "-registry", reg, "-timeout", "5s", "broker", "config", "-b", ha},
	} {
		code, _, stderr := runCmd(t, args...)
		if code != exitFailure || !strings.Contains(stderr, ha+" answers SmartGo HA replication: a master broker's HA port") ||
			!strings.Contains(stderr, "brokers on 10911") {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}
