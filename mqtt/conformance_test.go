package mqtt

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

const v5, v311 = packets.Version5, packets.Version311

func TestMQTTConnectV5Properties(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.KeepAliveMax = 30 * time.Second; o.SessionExpiryMax = time.Hour })
	r := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{CleanStart: true, KeepAlive: 0}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 7200
	ack := r.connect(cp)
	p := ack.Properties
	if ack.ReasonCode != 0 || ack.SessionPresent {
		t.Fatalf("connack %+v", ack)
	}
	if !p.Present.Has(packets.PropAssignedClientID) || p.AssignedClientID == "" {
		t.Fatal("no assigned client identifier")
	}
	if !p.Present.Has(packets.PropServerKeepAlive) || p.ServerKeepAlive != 30 {
		t.Fatalf("server keep alive %d", p.ServerKeepAlive)
	}
	if !p.Present.Has(packets.PropSessionExpiry) || p.SessionExpiry != 3600 {
		t.Fatalf("session expiry %d", p.SessionExpiry)
	}
	if p.ReceiveMaximum != DefaultReceiveMaximum || p.MaximumPacketSize != DefaultMaxPacketSize ||
		p.TopicAliasMaximum != DefaultTopicAliasMaximum || p.SharedSubAvailable != 1 {
		t.Fatalf("limits %+v", p)
	}
	r.send(&packets.Pingreq{})
	if _, ok := r.recv().(*packets.Pingresp); !ok {
		t.Fatal("no PINGRESP")
	}
}

func TestMQTTConnectV311EmptyClientID(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v311)
	if ack := r.connect(&packets.Connect{CleanStart: false}); ack.ReasonCode != packets.ConnectRefusedIdentifierRejected {
		t.Fatalf("want 0x02, got %v", ack.ReasonCode)
	}
	r.closed()
	r = dialRaw(t, ts.addr, v311)
	if ack := r.connect(&packets.Connect{CleanStart: true}); ack.ReasonCode != 0 {
		t.Fatalf("clean session with empty id refused: %v", ack.ReasonCode)
	}
}

func TestMQTTConnectUnsupportedVersion(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v311)
	// CONNECT "MQTT" level 6.
	r.sendBytes([]byte{0x10, 0x0C, 0, 4, 'M', 'Q', 'T', 'T', 6, 2, 0, 60, 0, 0})
	ack, ok := r.recv().(*packets.Connack)
	if !ok || ack.ReasonCode != packets.ConnectRefusedProtocolVersion {
		t.Fatalf("want CONNACK 0x01, got %+v", ack)
	}
	r.closed()
}

func TestMQTTSessionTakeover(t *testing.T) {
	ts := startServer(t, nil)
	a := connected(t, ts.addr, v5, "dev1")
	b := dialRaw(t, ts.addr, v5)
	b.connect(&packets.Connect{ClientID: "dev1", CleanStart: true})
	if code := a.closed(); code != int(packets.ReasonSessionTakenOver) {
		t.Fatalf("old connection got %d, want 0x8E", code)
	}
	// The old v3 connection is simply closed.
	c := connected(t, ts.addr, v311, "dev2")
	d := dialRaw(t, ts.addr, v311)
	d.connect(&packets.Connect{ClientID: "dev2", CleanStart: true})
	if code := c.closed(); code != -1 {
		t.Fatalf("v3 got DISCONNECT %d", code)
	}
}

func TestMQTTSessionResumeAndRedelivery(t *testing.T) {
	for _, v := range []packets.Version{v311, v5} {
		t.Run(v.String(), func(t *testing.T) {
			ts := startServer(t, nil)
			r := dialRaw(t, ts.addr, v)
			cp := &packets.Connect{ClientID: "s1", CleanStart: false}
			if v == v5 {
				cp.Properties.Present.Add(packets.PropSessionExpiry)
				cp.Properties.SessionExpiry = 60
			}
			r.connect(cp)
			r.subscribe(1, sub("q/+", 1), sub("q2/#", 2))
			// Receive one message but do not acknowledge it, then drop.
			pub := connected(t, ts.addr, v5, "pub")
			pub.publish1(1, "q/a", "m1")
			got := r.expectPublish()
			if got.QoS != 1 || string(got.Payload) != "m1" {
				t.Fatalf("got %+v", got)
			}
			r.nc.Close()
			testutil.WaitFor(t, 10*time.Second, "offline", func() bool {
				ts.mu.Lock()
				defer ts.mu.Unlock()
				ss := ts.sessions["s1"]
				return ss != nil && !ss.online.Load()
			})
			pub.publish1(2, "q/b", "m2")
			pub.send(&packets.Publish{QoS: 2, PacketID: 3, Topic: "q2/x", Payload: []byte("m3")})
			pub.recv() // PUBREC
			pub.send(&packets.Pubrel{PacketID: 3})
			pub.recv() // PUBCOMP
			pub.send(&packets.Publish{QoS: 0, Topic: "q/c", Payload: []byte("lost")})
			// A QoS 0 publish has no acknowledgement: a ping round trip on
			// the same connection makes sure the server handled it while
			// the session was still offline, not after the reconnect below.
			pub.send(&packets.Pingreq{})
			if p := pub.recv(); true {
				if _, ok := p.(*packets.Pingresp); !ok {
					t.Fatalf("want PINGRESP, got %T %+v", p, p)
				}
			}

			r = dialRaw(t, ts.addr, v)
			ack := r.connect(cp)
			if !ack.SessionPresent {
				t.Fatal("session not present")
			}
			first := r.expectPublish()
			if !first.Dup || first.PacketID != got.PacketID || string(first.Payload) != "m1" {
				t.Fatalf("redelivery %+v", first)
			}
			second := r.expectPublish()
			third := r.expectPublish()
			if string(second.Payload) != "m2" || string(third.Payload) != "m3" || third.QoS != 2 || second.Dup {
				t.Fatalf("queued %+v %+v", second, third)
			}
			r.send(&packets.Puback{PacketID: first.PacketID})
			r.send(&packets.Puback{PacketID: second.PacketID})
			r.send(&packets.Pubrec{PacketID: third.PacketID})
			if p := r.recv(); true {
				if rel, ok := p.(*packets.Pubrel); !ok || rel.PacketID != third.PacketID {
					t.Fatalf("want PUBREL, got %T %+v", p, p)
				}
			}
			r.send(&packets.Pubcomp{PacketID: third.PacketID})
			r.nothing(100 * time.Millisecond)
		})
	}
}

func TestMQTTSessionExpiry(t *testing.T) {
	ts := startServer(t, nil)
	r := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "e1"}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 1
	r.connect(cp)
	r.subscribe(1, sub("x", 1))
	r.send(&packets.Disconnect{})
	r.closed()
	testutil.WaitFor(t, 10*time.Second, "session expired", func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.sessions["e1"] == nil
	})
	r = dialRaw(t, ts.addr, v5)
	if ack := r.connect(cp); ack.SessionPresent {
		t.Fatal("expired session still present")
	}
}

func TestMQTTSessionSurvivesServerRestart(t *testing.T) {
	b := NewMemoryBackend()
	ts := startServer(t, nil, b)
	r := dialRaw(t, ts.addr, v311)
	r.connect(&packets.Connect{ClientID: "p1", CleanStart: false})
	r.subscribe(1, sub("r/#", 1))
	r.send(&packets.Disconnect{})
	r.closed()
	ts.Close()
	ts2 := startServer(t, nil, b)
	pub := connected(t, ts2.addr, v5, "pub")
	r = dialRaw(t, ts2.addr, v311)
	if ack := r.connect(&packets.Connect{ClientID: "p1", CleanStart: false}); !ack.SessionPresent {
		t.Fatal("session not restored from backend")
	}
	pub.publish1(1, "r/1", "after restart")
	if got := r.expectPublish(); string(got.Payload) != "after restart" {
		t.Fatalf("got %+v", got)
	}
}

func TestMQTTQoSBothWays(t *testing.T) {
	for _, v := range []packets.Version{v311, v5} {
		t.Run(v.String(), func(t *testing.T) {
			ts := startServer(t, nil)
			s := connected(t, ts.addr, v, "sub")
			sa := s.subscribe(1, sub("t/0", 0), sub("t/1", 1), sub("t/2", 2))
			if !slices.Equal(sa.ReasonCodes, []packets.ReasonCode{0, 1, 2}) {
				t.Fatalf("suback %v", sa.ReasonCodes)
			}
			p := connected(t, ts.addr, v, "pub")
			p.send(&packets.Publish{Topic: "t/0", Payload: []byte("zero")})
			if got := s.expectPublish(); got.QoS != 0 || string(got.Payload) != "zero" {
				t.Fatalf("%+v", got)
			}
			if a := p.publish1(5, "t/1", "one"); a.PacketID != 5 || a.ReasonCode != 0 {
				t.Fatalf("puback %+v", a)
			}
			got := s.expectPublish()
			if got.QoS != 1 || string(got.Payload) != "one" {
				t.Fatalf("%+v", got)
			}
			s.send(&packets.Puback{PacketID: got.PacketID})
			// QoS 2 in: PUBREC, duplicate PUBLISH is not re-delivered.
			p.send(&packets.Publish{QoS: 2, PacketID: 9, Topic: "t/2", Payload: []byte("two")})
			if rec, ok := p.recv().(*packets.Pubrec); !ok || rec.PacketID != 9 {
				t.Fatal("want PUBREC")
			}
			p.send(&packets.Publish{QoS: 2, PacketID: 9, Dup: true, Topic: "t/2", Payload: []byte("two")})
			if _, ok := p.recv().(*packets.Pubrec); !ok {
				t.Fatal("want PUBREC for DUP")
			}
			p.send(&packets.Pubrel{PacketID: 9})
			if c, ok := p.recv().(*packets.Pubcomp); !ok || c.PacketID != 9 {
				t.Fatal("want PUBCOMP")
			}
			got = s.expectPublish()
			if got.QoS != 2 || string(got.Payload) != "two" {
				t.Fatalf("%+v", got)
			}
			s.send(&packets.Pubrec{PacketID: got.PacketID})
			if rel, ok := s.recv().(*packets.Pubrel); !ok || rel.PacketID != got.PacketID {
				t.Fatal("want PUBREL")
			}
			s.send(&packets.Pubcomp{PacketID: got.PacketID})
			s.nothing(100 * time.Millisecond) // exactly once
			// Downgrade: QoS 2 publish to a QoS 0 subscription.
			p.send(&packets.Publish{QoS: 1, PacketID: 10, Topic: "t/0", Payload: []byte("down")})
			p.recv()
			if got := s.expectPublish(); got.QoS != 0 {
				t.Fatalf("not downgraded: %+v", got)
			}
			if v == v5 {
				// PUBREL for an unknown id: PUBCOMP 0x92.
				p.send(&packets.Pubrel{PacketID: 77})
				if c := p.recv().(*packets.Pubcomp); c.ReasonCode != packets.ReasonPacketIdentifierNotFound {
					t.Fatalf("pubcomp %v", c.ReasonCode)
				}
			}
		})
	}
}

func TestMQTTWildcardsAndDollarTopics(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ReservedFilters = []string{} })
	s := connected(t, ts.addr, v5, "sub")
	s.subscribe(1, sub("#", 0))
	s2 := connected(t, ts.addr, v5, "sub2")
	s2.subscribe(1, sub("a/+/c", 0), sub("$other/#", 0))
	s3 := connected(t, ts.addr, v5, "sub3")
	s3.subscribe(1, sub("a/#", 0))
	p := connected(t, ts.addr, v5, "pub")
	p.send(&packets.Publish{Topic: "$other/x", Payload: []byte("sys")})
	p.send(&packets.Publish{Topic: "a/b/c", Payload: []byte("abc")})
	p.send(&packets.Publish{Topic: "a", Payload: []byte("a")})
	if got := s.expectPublish(); got.Topic != "a/b/c" {
		t.Fatalf("# got %q ($ topic leaked?)", got.Topic)
	}
	if got := s.expectPublish(); got.Topic != "a" {
		t.Fatalf("# got %q", got.Topic)
	}
	if got := s2.expectPublish(); got.Topic != "$other/x" {
		t.Fatalf("$other/# got %q", got.Topic)
	}
	if got := s2.expectPublish(); got.Topic != "a/b/c" {
		t.Fatalf("a/+/c got %q", got.Topic)
	}
	if got := s3.expectPublish(); got.Topic != "a/b/c" {
		t.Fatalf("a/# got %q", got.Topic)
	}
	if got := s3.expectPublish(); got.Topic != "a" {
		t.Fatalf("a/# did not match parent: %q", got.Topic)
	}
	s2.nothing(50 * time.Millisecond)
	// Unsubscribe.
	s.send(&packets.Unsubscribe{PacketID: 2, Filters: []string{"#", "nope"}})
	ua := s.recv().(*packets.Unsuback)
	if !slices.Equal(ua.ReasonCodes, []packets.ReasonCode{0, packets.ReasonNoSubscriptionExisted}) {
		t.Fatalf("unsuback %v", ua.ReasonCodes)
	}
	p.send(&packets.Publish{Topic: "a", Payload: []byte("a")})
	s.nothing(100 * time.Millisecond)
}

func TestMQTTSubscriptionOptionsAndIdentifiers(t *testing.T) {
	ts := startServer(t, nil)
	c := connected(t, ts.addr, v5, "c")
	s1 := &packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{{Filter: "o/+", QoS: 1}}}
	s1.Properties.SubscriptionIdentifiers = []uint32{7}
	c.send(s1)
	c.expectSuback()
	s2 := &packets.Subscribe{PacketID: 2, Subscriptions: []packets.Subscription{{Filter: "o/#", QoS: 0, NoLocal: true}}}
	s2.Properties.SubscriptionIdentifiers = []uint32{9}
	c.send(s2)
	c.expectSuback()
	other := connected(t, ts.addr, v5, "other")
	other.publish1(1, "o/x", "m")
	got := c.expectPublish()
	ids := slices.Clone(got.Properties.SubscriptionIdentifiers)
	slices.Sort(ids)
	if !slices.Equal(ids, []uint32{7, 9}) || got.QoS != 1 {
		t.Fatalf("one copy with both ids wanted, got qos %d ids %v", got.QoS, ids)
	}
	c.send(&packets.Puback{PacketID: got.PacketID})
	c.nothing(50 * time.Millisecond)
	// No local: own publish matches only o/+ (id 7).
	c.send(&packets.Publish{QoS: 1, PacketID: 3, Topic: "o/y", Payload: []byte("self")})
	got = c.expectPublish() // delivered before the PUBACK
	if _, ok := c.recv().(*packets.Puback); !ok {
		t.Fatal("want PUBACK")
	}
	if !slices.Equal(got.Properties.SubscriptionIdentifiers, []uint32{7}) {
		t.Fatalf("no local ignored: ids %v", got.Properties.SubscriptionIdentifiers)
	}
}

func TestMQTTRetained(t *testing.T) {
	ts := startServer(t, nil)
	p := connected(t, ts.addr, v5, "pub")
	p.send(&packets.Publish{Topic: "r/a", Retain: true, QoS: 1, PacketID: 1, Payload: []byte("one")})
	p.recv()
	p.send(&packets.Publish{Topic: "r/a", Retain: true, QoS: 1, PacketID: 2, Payload: []byte("two")}) // replace
	p.recv()
	p.send(&packets.Publish{Topic: "r/b", Retain: true, QoS: 1, PacketID: 3, Payload: []byte("b")})
	p.recv()
	p.send(&packets.Publish{Topic: "r/b", Retain: true, QoS: 1, PacketID: 4}) // delete
	p.recv()
	exp := &packets.Publish{Topic: "r/c", Retain: true, QoS: 1, PacketID: 5, Payload: []byte("c")}
	exp.Properties.Present.Add(packets.PropMessageExpiry)
	exp.Properties.MessageExpiry = 1
	p.send(exp)
	p.recv()
	s := connected(t, ts.addr, v5, "s")
	s.subscribe(1, sub("r/a", 1))
	got := s.expectPublish()
	if !got.Retain || string(got.Payload) != "two" {
		t.Fatalf("retained %+v", got)
	}
	s.send(&packets.Puback{PacketID: got.PacketID})
	// Retain handling 1: only for a new subscription; 2: never.
	s.send(&packets.Subscribe{PacketID: 2, Subscriptions: []packets.Subscription{{Filter: "r/a", QoS: 1, RetainHandling: 1}}})
	s.expectSuback()
	s.send(&packets.Subscribe{PacketID: 3, Subscriptions: []packets.Subscription{{Filter: "r/+", QoS: 1, RetainHandling: 2}}})
	s.expectSuback()
	s.nothing(100 * time.Millisecond)
	// A live message on a retained topic: retain flag cleared unless retain as published.
	s.send(&packets.Subscribe{PacketID: 4, Subscriptions: []packets.Subscription{{Filter: "live", RetainAsPublished: true}}})
	s.expectSuback()
	p.send(&packets.Publish{Topic: "r/a", Retain: true, Payload: []byte("three")})
	p.send(&packets.Publish{Topic: "live", Retain: true, Payload: []byte("rap")})
	got = s.expectPublish()
	if got.Retain || string(got.Payload) != "three" {
		t.Fatalf("live retained %+v", got)
	}
	if got = s.expectPublish(); !got.Retain {
		t.Fatalf("retain as published lost: %+v", got)
	}
	time.Sleep(1100 * time.Millisecond)
	s2 := connected(t, ts.addr, v5, "s2")
	s2.subscribe(1, sub("r/#", 0))
	got = s2.expectPublish()
	if got.Topic != "r/a" || string(got.Payload) != "three" {
		t.Fatalf("%+v", got)
	}
	s2.nothing(100 * time.Millisecond) // r/b deleted, r/c expired
}

func TestMQTTSharedSubscriptions(t *testing.T) {
	ts := startServer(t, nil)
	var members []*rawClient
	for _, id := range []string{"m1", "m2", "m3"} {
		m := connected(t, ts.addr, v5, id)
		m.subscribe(1, sub("$share/g/jobs/+", 0))
		members = append(members, m)
	}
	plain := connected(t, ts.addr, v5, "plain")
	plain.subscribe(1, sub("jobs/#", 0))
	p := connected(t, ts.addr, v5, "pub")
	for i := range 9 {
		p.send(&packets.Publish{Topic: "jobs/x", Payload: []byte{byte(i)}})
	}
	for _, m := range members {
		for range 3 {
			m.expectPublish()
		}
		m.nothing(50 * time.Millisecond)
	}
	for range 9 {
		plain.expectPublish()
	}
}

func TestMQTTWill(t *testing.T) {
	ts := startServer(t, nil)
	w := connected(t, ts.addr, v5, "watcher")
	w.subscribe(1, sub("will/#", 1))
	// Abnormal close: will sent, with its properties.
	r := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "dying", CleanStart: true, WillFlag: true, WillQoS: 1, WillTopic: "will/dying", WillPayload: []byte("bye")}
	cp.WillProperties.Present.Add(packets.PropContentType)
	cp.WillProperties.ContentType = "text/plain"
	cp.WillProperties.User = []packets.UserProperty{{Key: "k", Value: "v"}}
	r.connect(cp)
	r.nc.Close()
	got := w.expectPublish()
	if string(got.Payload) != "bye" || got.Properties.ContentType != "text/plain" || len(got.Properties.User) != 1 {
		t.Fatalf("will %+v", got)
	}
	w.send(&packets.Puback{PacketID: got.PacketID})
	// Normal DISCONNECT: no will.
	r = dialRaw(t, ts.addr, v5)
	r.connect(cp)
	r.send(&packets.Disconnect{})
	r.closed()
	w.nothing(100 * time.Millisecond)
	// DISCONNECT 0x04: will.
	r = dialRaw(t, ts.addr, v5)
	r.connect(cp)
	r.send(&packets.Disconnect{ReasonCode: packets.ReasonDisconnectWithWill})
	w.expectPublish()
	// Will delay: cancelled by a reconnect within the delay.
	delayed := *cp
	delayed.CleanStart = false
	delayed.ClientID = "slow"
	delayed.Properties.Present.Add(packets.PropSessionExpiry)
	delayed.Properties.SessionExpiry = 60
	delayed.WillProperties = packets.Properties{}
	delayed.WillProperties.Present.Add(packets.PropWillDelay)
	delayed.WillProperties.WillDelay = 1
	r = dialRaw(t, ts.addr, v5)
	r.connect(&delayed)
	r.nc.Close()
	r = dialRaw(t, ts.addr, v5)
	r.connect(&delayed)
	w.nothing(1500 * time.Millisecond)
	// ...and sent after the delay otherwise.
	start := time.Now()
	r.nc.Close()
	w.expectPublish()
	if el := time.Since(start); el < 800*time.Millisecond {
		t.Fatalf("will delay not honoured: %v", el)
	}
}

func TestMQTTV5PropertiesPassThrough(t *testing.T) {
	ts := startServer(t, nil)
	s := connected(t, ts.addr, v5, "s")
	s.subscribe(1, sub("props", 1))
	p := connected(t, ts.addr, v5, "p")
	pub := &packets.Publish{Topic: "props", QoS: 1, PacketID: 1, Payload: []byte("héllo")}
	pr := &pub.Properties
	pr.Present = propSet(packets.PropPayloadFormat, packets.PropContentType, packets.PropResponseTopic,
		packets.PropCorrelationData, packets.PropMessageExpiry)
	pr.PayloadFormat, pr.ContentType, pr.ResponseTopic = 1, "text/plain", "resp/1"
	pr.CorrelationData, pr.MessageExpiry = []byte{0, 1, 2}, 100
	pr.User = []packets.UserProperty{{Key: "b", Value: "1"}, {Key: "a", Value: "2"}, {Key: "b", Value: "3"}}
	p.send(pub)
	p.recv()
	got := s.expectPublish().Properties
	if got.PayloadFormat != 1 || got.ContentType != "text/plain" || got.ResponseTopic != "resp/1" ||
		!bytes.Equal(got.CorrelationData, []byte{0, 1, 2}) || !slices.Equal(got.User, pr.User) ||
		got.MessageExpiry == 0 || got.MessageExpiry > 100 {
		t.Fatalf("properties changed: %+v", got)
	}
	// Payload format 1 with invalid UTF-8: PUBACK 0x99.
	bad := &packets.Publish{Topic: "props", QoS: 1, PacketID: 2, Payload: []byte{0xff, 0xfe}}
	bad.Properties.Present.Add(packets.PropPayloadFormat)
	bad.Properties.PayloadFormat = 1
	p.send(bad)
	if a := p.recv().(*packets.Puback); a.ReasonCode != packets.ReasonPayloadFormatInvalid || a.Properties.ReasonString == "" {
		t.Fatalf("puback %+v", a)
	}
}

func TestMQTTTopicAliases(t *testing.T) {
	ts := startServer(t, nil)
	// Outbound: the client allows 2 aliases.
	s := dialRaw(t, ts.addr, v5)
	cp := &packets.Connect{ClientID: "s", CleanStart: true}
	cp.Properties.Present.Add(packets.PropTopicAliasMaximum)
	cp.Properties.TopicAliasMaximum = 2
	s.connect(cp)
	s.subscribe(1, sub("al/#", 0))
	p := connected(t, ts.addr, v5, "p")
	// Inbound alias: set with topic, then use with empty topic.
	a := &packets.Publish{Topic: "al/one", Payload: []byte("1")}
	a.Properties.Present.Add(packets.PropTopicAlias)
	a.Properties.TopicAlias = 3
	p.send(a)
	b := &packets.Publish{Payload: []byte("2")}
	b.Properties.Present.Add(packets.PropTopicAlias)
	b.Properties.TopicAlias = 3
	p.send(b)
	g1, g2 := s.expectPublish(), s.expectPublish()
	if g1.Topic != "al/one" || g1.Properties.TopicAlias != 1 {
		t.Fatalf("first %+v", g1)
	}
	if g2.Topic != "" || g2.Properties.TopicAlias != 1 || string(g2.Payload) != "2" {
		t.Fatalf("second %+v", g2)
	}
	for _, topic := range []string{"al/two", "al/three"} {
		p.send(&packets.Publish{Topic: topic})
	}
	if g := s.expectPublish(); g.Properties.TopicAlias != 2 {
		t.Fatalf("%+v", g)
	}
	if g := s.expectPublish(); g.Properties.Present.Has(packets.PropTopicAlias) || g.Topic != "al/three" {
		t.Fatalf("alias beyond the client's maximum: %+v", g)
	}
	// Unknown alias: protocol error.
	u := &packets.Publish{}
	u.Properties.Present.Add(packets.PropTopicAlias)
	u.Properties.TopicAlias = 9
	p.send(u)
	if code := p.closed(); code != int(packets.ReasonProtocolError) {
		t.Fatalf("unknown alias: %d", code)
	}
	// Alias over the server's maximum: 0x94.
	q := connected(t, ts.addr, v5, "q")
	o := &packets.Publish{Topic: "al/x"}
	o.Properties.Present.Add(packets.PropTopicAlias)
	o.Properties.TopicAlias = DefaultTopicAliasMaximum + 1
	q.send(o)
	if code := q.closed(); code != int(packets.ReasonTopicAliasInvalid) {
		t.Fatalf("alias too big: %d", code)
	}
}

// MQTT-3.3.4-6: a PUBLISH from a client must not carry a subscription
// identifier; the server closes with 0x82 and delivers nothing of it.
func TestMQTTClientPublishWithSubscriptionIdentifier(t *testing.T) {
	ts := startServer(t, nil)
	s := connected(t, ts.addr, v5, "s")
	s.subscribe(1, sub("sid/#", 1))
	p := connected(t, ts.addr, v5, "p")
	bad := &packets.Publish{Topic: "sid/x", QoS: 1, PacketID: 1, Payload: []byte("bad")}
	bad.Properties.SubscriptionIdentifiers = []uint32{5}
	p.send(bad)
	if code := p.closed(); code != int(packets.ReasonProtocolError) {
		t.Fatalf("a client's PUBLISH with a subscription identifier: closed with %d, want 0x82", code)
	}
	q := connected(t, ts.addr, v5, "q")
	q.send(&packets.Publish{Topic: "sid/x", QoS: 1, PacketID: 1, Payload: []byte("ok")})
	q.recv()
	if g := s.expectPublish(); string(g.Payload) != "ok" {
		t.Fatalf("the subscriber got %q first, want only the later %q", g.Payload, "ok")
	}
}
