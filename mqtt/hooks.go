package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Hooks for components that extend a server (a device registry front such
// as an IoT hub surface): an authentication hook that sees the whole
// CONNECT and the TLS client certificate, connection lifecycle callbacks,
// and delivery into one client's session through its own subscriptions.

// ConnectRequest is a CONNECT as Options.Authenticate sees it.
type ConnectRequest struct {
	// ClientID is the client identifier as sent ("" when the client asked
	// the server to assign one).
	ClientID    string
	Username    string
	HasUsername bool
	Password    []byte
	HasPassword bool
	CleanStart  bool
	// Transient: the connect starts a session that ends with its
	// connection (clean start, and 3.1.1 or no MQTT 5 session expiry):
	// it resumes nothing and nothing of it outlasts the connection.
	Transient  bool
	Version    byte // protocol level: 3, 4 or 5
	RemoteAddr string
	// PeerCertificates is the client's TLS certificate chain, leaf first;
	// nil on a plain listener or when the client sent none. The handshake
	// proved that the client holds the leaf's private key; the chain is
	// verified only as far as the listener's tls.Config asks.
	PeerCertificates []*x509.Certificate
}

// Authentication outcomes of Options.Authenticate (match with errors.Is).
var (
	// ErrBadCredentials refuses a CONNECT with 0x86 bad user name or
	// password (3.1.1: return code 4).
	ErrBadCredentials = errors.New("mqtt: bad credentials")
	// ErrUnavailable refuses a CONNECT with 0x88 server unavailable (3.1.1:
	// return code 3): the authenticator could not decide now.
	ErrUnavailable = errors.New("mqtt: server unavailable")
	// ErrNotSubscribed is returned by Server.SendToSubscriber when no
	// subscription of the client's session matches the message's topic.
	ErrNotSubscribed = errors.New("mqtt: client not subscribed")
)

// authenticate runs Options.Authenticate: decided is true when the hook
// accepted the client (the credentials file is then skipped); a refusal
// comes back as its reason code and detail.
func (s *Server) authenticate(c *conn, cp *packets.Connect) (decided bool, code packets.ReasonCode, detail string) {
	if s.opts.Authenticate == nil {
		return false, 0, ""
	}
	req := &ConnectRequest{ClientID: cp.ClientID, Username: cp.Username, HasUsername: cp.UsernameFlag,
		Password: cp.Password, HasPassword: cp.PasswordFlag, CleanStart: cp.CleanStart, Version: byte(cp.Version),
		RemoteAddr: c.remote}
	req.Transient = cp.CleanStart && (cp.Version != packets.Version5 || !cp.Properties.Present.Has(packets.PropSessionExpiry) ||
		cp.Properties.SessionExpiry == 0)
	if c.tls != nil {
		if tc, ok := c.tls.nc.(*tls.Conn); ok {
			if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
				req.PeerCertificates = certs
			}
		}
	}
	ok, err := s.opts.Authenticate(req)
	switch {
	case err == nil:
		return ok, 0, ""
	case errors.Is(err, ErrBadCredentials):
		return false, packets.ReasonBadUserNameOrPassword, err.Error()
	case errors.Is(err, ErrUnavailable):
		return false, packets.ReasonServerUnavailable, err.Error()
	default:
		return false, packets.ReasonNotAuthorized, err.Error()
	}
}

// SendToSubscriber delivers msg into the session of clientID through the
// session's own subscriptions, as Deliver would for that one client: at
// the highest QoS among its subscriptions whose filters match msg.Topic
// (capped by msg.QoS), with their subscription identifiers. Topics that
// share a name across clients (per-client replies and requests) reach
// only the named client this way. Only a connected session gets it:
// ErrNoSession, ErrNotConnected or ErrNotSubscribed say why not, and
// ErrQueueFull that its queue had no room.
func (s *Server) SendToSubscriber(clientID string, msg *Message) error {
	ss, err := s.sessionOf(clientID)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead || ss.conn == nil {
		return fmt.Errorf("%w: %q", ErrNotConnected, clientID)
	}
	found := false
	var qos byte
	var ids []uint32
	for _, sub := range ss.subs {
		f := sub.Filter
		if packets.IsShared(f) || !packets.Match(f, msg.Topic) || !s.res.visible(f, msg.Topic) {
			continue
		}
		if !found || sub.QoS > qos {
			qos = sub.QoS
		}
		found = true
		ids = AddSubID(ids, sub.Identifier)
	}
	if !found {
		return fmt.Errorf("%w: %q to %s", ErrNotSubscribed, clientID, msg.Topic)
	}
	if !ss.deliverLocked(msg, min(qos, msg.QoS), false, ids, nil) {
		return ErrQueueFull
	}
	return nil
}

// connected runs Options.OnConnect for an accepted connection.
func (s *Server) connected(c *conn) {
	if s.opts.OnConnect != nil {
		s.opts.OnConnect(c.info())
	}
}

// disconnected runs Options.OnDisconnect once an accepted connection ended.
func (s *Server) disconnected(info ClientInfo) {
	if s.opts.OnDisconnect != nil {
		s.opts.OnDisconnect(info)
	}
}
