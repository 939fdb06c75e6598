package main

import (
	"context"
	"fmt"
	"hash/crc32"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// consumeOnce makes group exist on the cluster's brokers: a consumer of
// topic comes, its group reaches them (`admin group progress` answers),
// and it goes.
func consumeOnce(ctx context.Context, t *testing.T, c *cluster.Cluster, group, topic string) {
	t.Helper()
	pc, err := client.NewPushConsumer(client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}, Group: group},
		func(context.Context, []*client.MessageExt) client.ConsumeResult { return client.ConsumeSuccess })
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Subscribe(topic, "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	reg := c.RegistryAddrs()[0]
	for code, _, _ := runCmd(t, "admin", "-registry", reg, "group", "progress", "-g", group); code != exitOK; code, _, _ = runCmd(t, "admin", "-registry", reg, "group", "progress", "-g", group) {
		if ctx.Err() != nil {
			t.Fatal("the consumer's group never reached the broker")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// registerHungBroker registers, with the registry at reg, a master
// broker-z of topic PartialT whose address accepts connections and never
// answers (a hung process, or one cut off behind a half-open connection).
// It returns that address.
func registerHungBroker(t *testing.T, reg string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() }) // read nothing, answer nothing
		}
	}()
	addr := ln.Addr().String()
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() }) // the registry keeps the broker while this connection lives
	body, err := protocol.EncodeJSON(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: protocol.TopicConfigSerializeWrapper{
		DataVersion: protocol.DataVersion{Counter: 1, Timestamp: time.Now().UnixMilli()}, TopicConfigTable: map[string]*protocol.TopicConfig{
			"PartialT": {TopicName: "PartialT", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}}})
	if err != nil {
		t.Fatal(err)
	}
	req := protocol.NewRequest(protocol.RegisterBroker, &protocol.RegisterBrokerRequestHeader{BrokerName: "broker-z", BrokerAddr: addr,
		ClusterName: "HungCluster", HAServerAddr: addr, BodyCRC32: int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)}, body)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := rc.Invoke(ctx, reg, req); err != nil || resp.Code != protocol.Success {
		t.Fatalf("register the hung broker: %v %+v", err, resp)
	}
	return addr
}

// With a broker that does not answer, `admin group progress`, `admin
// statestore keys`, `admin topic stats`, `admin msg by-key`, `admin msg
// browse`, `admin broker stats` and `admin broker config` print what the other brokers
// returned and then say which did not answer (exit 1); they used to print
// only the error. `admin topic create|update|delete` and `admin group
// create|update|delete` act on the others, say so (naming them) and then
// which did not answer (exit 1).
func TestCmdAdminPartialAnswers(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := c.RegistryAddrs()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := testProducer(t, c.RegistryAddrs())
	if _, err := p.Send(ctx, &client.Message{Topic: "PartialT", Keys: []string{"pk"}, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	consumeOnce(ctx, t, c, "pg", "PartialT")

	hung := registerHungBroker(t, reg)
	// Each command waits out its request to the hung broker (seconds):
	// the read-only ones run at once, each create, update, delete
	// sequence one step after another.
	check := func(args []string) error {
		code, stdout, stderr := runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
		if code != exitFailure || !strings.Contains(stderr, "some broker groups did not answer") || !strings.Contains(stderr, hung) {
			return fmt.Errorf("admin %v with a hung broker: exit %d, stderr %q", args, code, stderr)
		}
		want := map[string]string{"group": "PartialT", "statestore": "KEY", "topic": "broker-a", "msg": "PartialT",
			"broker": "brokerName"}[args[0]]
		if args[0] == "group" && args[1] != "progress" {
			want = "broker-a"
		}
		if !strings.Contains(stdout, want) {
			return fmt.Errorf("admin %v with a hung broker printed nothing of the others: %q", args, stdout)
		}
		return nil
	}
	seqs := [][][]string{{{"group", "progress", "-g", "pg"}}, {{"statestore", "keys"}}, {{"topic", "stats", "-t", "PartialT"}},
		{{"msg", "by-key", "-t", "PartialT", "-k", "pk"}}, {{"msg", "browse", "-t", "PartialT"}}, {{"broker", "stats"}}, {{"broker", "config"}},
		{{"topic", "create", "-t", "PartialNew"}, {"topic", "update", "-t", "PartialNew", "-perm", "4"}, {"topic", "delete", "-t", "PartialNew"}},
		{{"group", "create", "-g", "PartialG"}, {"group", "update", "-g", "PartialG", "-retry", "3"}, {"group", "delete", "-g", "PartialG"}}}
	errs := make(chan error, len(seqs))
	for _, seq := range seqs {
		go func() {
			for _, args := range seq {
				if err := check(args); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range seqs {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
