package main

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// TestCmdAdminResendOfMessageIDNamingASlave: the offset message id of a
// message names the broker that stored it; after a failover that broker
// may serve again as its group's slave (controller mode), at the same
// address and with the same log. Resending such a message to a group
// (the console's "Resend to group") goes to the group's master: a slave
// leaves a send-back it cannot store unanswered, so the resend used to
// time out. The id is made here from the slave's address and the record's
// offset, which a byte copy of the master's log shares.
func TestCmdAdminResendOfMessageIDNamingASlave(t *testing.T) {
	const topic, group = "ResendSlaveT", "resend-slave-g"
	ctx, c, adm := resendCluster(t, cluster.Options{Slaves: true}, topic)
	if err := adm.CreateGroup(ctx, "", admin.GroupConfig{Name: group}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRoute(ctx, topic); err != nil {
		t.Fatal(err)
	}
	_, _, off := sendAgain(ctx, t, c, topic)
	slaveID := record.OffsetMessageID(netip.MustParseAddrPort(c.SlaveAddr(0)), off)
	testutil.WaitFor(t, 30*time.Second, "the slave holds the message", func() bool {
		m, err := adm.MessageByID(ctx, slaveID)
		return err == nil && string(m.Body) == "again"
	})
	retry := "%RETRY%" + group
	before := c.Broker(0).Store().MaxOffset(retry, 0)
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if err := adm.ResendToGroup(rctx, slaveID, group); err != nil {
		t.Fatalf("resend of %s (an id naming the slave): %v", slaveID, err)
	}
	testutil.WaitFor(t, 30*time.Second, "the resent copy in the group's retry topic on the master", func() bool {
		return c.Broker(0).Store().MaxOffset(retry, 0) > before
	})
}

// TestCmdAdminResendToGroupWithoutRetries: a group whose retries are
// disabled (retryQueueNums 0, as mqadmin's updateSubGroup can leave it)
// has a send-back answered as done and its message dropped by the broker,
// as RocketMQ does. A resend to such a group (the console's "Resend to
// group") used to say it succeeded and deliver nothing; it is refused now
// with ErrRetriesDisabled, and the group's retry topic gets nothing.
func TestCmdAdminResendToGroupWithoutRetries(t *testing.T) {
	const topic, group = "ResendNoRetryT", "resend-noretry-g"
	ctx, c, adm := resendCluster(t, cluster.Options{}, topic)
	if err := c.WaitRoute(ctx, topic); err != nil {
		t.Fatal(err)
	}
	putGroup(ctx, t, c.BrokerAddr(0), group, 0)
	p := testProducer(t, c.RegistryAddrs())
	res, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	retry := "%RETRY%" + group
	before := c.Broker(0).Store().MaxOffset(retry, 0)
	if err := adm.ResendToGroup(ctx, res.OffsetMsgID, group); !errors.Is(err, admin.ErrRetriesDisabled) {
		t.Fatalf("resend to a group without retries: %v, want ErrRetriesDisabled", err)
	}
	if after := c.Broker(0).Store().MaxOffset(retry, 0); after != before {
		t.Fatalf("the group's retry topic went from %d to %d", before, after)
	}
}

// TestCmdAdminResendToGroupUnknownWhereTheMessageIs: a group known to one
// master only (the brokers create no groups on first use) and a message
// stored on the other: the resend used to wait out its timeout (a broker
// leaves a send-back it cannot carry out unanswered) and then blame a
// full disk; it is refused at once with ErrGroupNotExist naming the
// broker and how to create the group there.
func TestCmdAdminResendToGroupUnknownWhereTheMessageIs(t *testing.T) {
	const topic, group = "ResendUnknownT", "resend-unknown-g"
	ctx, c, adm := resendCluster(t, cluster.Options{Brokers: 2,
		Broker: func(_ int, o *broker.Options) { o.AutoCreateGroup = false }}, topic)
	if err := c.WaitRoute(ctx, topic); err != nil {
		t.Fatal(err)
	}
	id, host, _ := sendAgain(ctx, t, c, topic)
	holder, other := 0, 1
	if host.String() == c.BrokerAddr(1) {
		holder, other = 1, 0
	}
	putGroup(ctx, t, c.BrokerAddr(other), group, 1) // on the other broker only
	err := adm.ResendToGroup(ctx, id, group)
	if !errors.Is(err, client.ErrGroupNotExist) || !strings.Contains(err.Error(), c.BrokerAddr(holder)) ||
		!strings.Contains(err.Error(), "smartgo admin group create -g "+group) {
		t.Fatalf("resend to a group the message's broker does not know: %v, want ErrGroupNotExist naming %s", err, c.BrokerAddr(holder))
	}
}

// sendAgain sends one message ("again") to topic and returns its offset
// message id, the broker the id names and the record's offset.
func sendAgain(ctx context.Context, t *testing.T, c *cluster.Cluster, topic string) (string, netip.AddrPort, int64) {
	t.Helper()
	res, err := testProducer(t, c.RegistryAddrs()).Send(ctx, &client.Message{Topic: topic, Body: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	host, off, err := record.ParseOffsetMessageID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	return res.OffsetMsgID, host, off
}

// putGroup creates group on the broker at addr only, with retryQueues
// retry queues (mqadmin's updateSubGroup can set 0).
func putGroup(ctx context.Context, t *testing.T, addr, group string, retryQueues int32) {
	t.Helper()
	body, err := protocol.EncodeJSON(protocol.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true,
		ConsumeBroadcastEnable: true, RetryMaxTimes: 16, RetryQueueNums: retryQueues, ConsumeFromMinEnable: true,
		WhichBrokerWhenConsumeSlowly: 1, NotifyConsumerIdsChangedEnable: true})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.UpdateAndCreateSubscriptionGroup, nil, body))
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("group %s with %d retry queues on %s: %v %+v", group, retryQueues, addr, err, resp)
	}
}

// resendCluster starts a cluster with opts (in a temp dir), an admin of
// it and topic (one queue), all closed at cleanup; ctx bounds the test.
func resendCluster(t *testing.T, opts cluster.Options, topic string) (context.Context, *cluster.Cluster, *admin.Admin) {
	t.Helper()
	opts.Dir = t.TempDir()
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	if err := adm.CreateTopic(ctx, "", admin.TopicConfig{Name: topic, ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	return ctx, c, adm
}

// TestCmdAdminMsgResend: `smartgo admin msg resend -id ID -g GROUP`, which
// docs/durability.md tells a user to type, copies the message to the
// group's retry topic (as the console's "Resend to group"); without -g it
// is a usage error, and a group no broker knows an error naming it.
func TestCmdAdminMsgResend(t *testing.T) {
	const topic, group = "ResendCmdT", "resend-cmd-g"
	ctx, c, _ := resendCluster(t, cluster.Options{}, topic)
	if err := c.WaitRoute(ctx, topic); err != nil {
		t.Fatal(err)
	}
	putGroup(ctx, t, c.BrokerAddr(0), group, 1)
	id, _, _ := sendAgain(ctx, t, c, topic)
	reg := strings.Join(c.RegistryAddrs(), ",")
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "msg", "resend", "-id", id); code != exitUsage || !strings.Contains(stderr, "-g is required") {
		t.Fatalf("resend without -g: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCmd(t, "admin", "-registry", reg, "msg", "resend", "-id", id, "-g", "resend-nobody-g"); code == exitOK || !strings.Contains(stderr, "resend-nobody-g") {
		t.Fatalf("resend to an unknown group: exit %d, stderr %q", code, stderr)
	}
	retry := "%RETRY%" + group
	before := c.Broker(0).Store().MaxOffset(retry, 0)
	code, out, stderr := runCmd(t, "admin", "-registry", reg, "msg", "resend", "-id", id, "-g", group, "-o", "json")
	if code != exitOK || !strings.Contains(out, `"resent": true`) {
		t.Fatalf("resend: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	testutil.WaitFor(t, 10*time.Second, "the message in the group's retry topic", func() bool {
		return c.Broker(0).Store().MaxOffset(retry, 0) == before+1
	})
}
