package main

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
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
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir(), Slaves: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	const topic, group = "ResendSlaveT", "resend-slave-g"
	if err := adm.CreateTopic(ctx, "", admin.TopicConfig{Name: topic, ReadQueues: 1, WriteQueues: 1}); err != nil {
		t.Fatal(err)
	}
	if err := adm.CreateGroup(ctx, "", admin.GroupConfig{Name: group}); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitRoute(ctx, topic); err != nil {
		t.Fatal(err)
	}
	p := testProducer(t, c.RegistryAddrs())
	res, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte("again")})
	if err != nil {
		t.Fatal(err)
	}
	_, off, err := record.ParseOffsetMessageID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
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
