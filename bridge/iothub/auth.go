package iothub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	tw "github.com/smartgo/smartgo/twin"
)

// Device authentication and topic rules.
//
// A CONNECT whose user name has IoT Hub's shape is a device's (or
// module's); any other is left to the MQTT server's own rules. A device's
// client id must be the identity its user name names, the host must be
// the hub's, and (registry mode) it proves itself with a SAS token in the
// password, signed with one of the identity's keys (or with the key of a
// policy holding deviceConnect, named in skn) over a resource covering
// the identity, not expired; or with a TLS client certificate whose
// SHA-1 or SHA-256 thumbprint the identity registered (selfSigned), or
// that chains to X509CAFile with the device id as common name
// (certificateAuthority). A disabled device is refused. In development
// mode (AuthNone) the shape and the client id are all that is checked.
// A model-id in the user name's query (IoT Plug and Play) must be a
// DTMI; it becomes the twin's modelId when the connection is recorded.

// authenticate is mqtt.Options.Authenticate.
func (h *Hub) authenticate(r *mqtt.ConnectRequest) (bool, error) {
	host, id, ok := parseUsername(r.Username, r.ClientID)
	if !ok {
		if r.Username == "" {
			h.noteAnonymous(r) // owner.go
		}
		return false, nil // not an IoT Hub device: the server's own rules apply
	}
	gen, err := h.checkDevice(r, host, id)
	if err != nil {
		h.stats.AuthFailures.Add(1)
		h.log.Info("iothub: device refused", "device", id.String(), "remote", r.RemoteAddr, "reason", reasonOf(err), "err", err)
		return false, err
	}
	h.noteOwner(r.ClientID, gen)
	return true, nil
}

// reasonOf is a stable reason key for rate-limited logs.
func reasonOf(err error) string {
	for _, e := range []error{ErrBadToken, ErrTokenExpired, ErrBadSignature, ErrUnauthorized, mqtt.ErrUnavailable} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

// checkDevice checks a device's CONNECT and returns the generation id of
// its identity, a module's own for a module ("" when the registry was
// not read or cannot say).
func (h *Hub) checkDevice(r *mqtt.ConnectRequest, host string, id Identity) (string, error) {
	if !h.started.Load() {
		return "", fmt.Errorf("%w: the IoT hub front is not running", mqtt.ErrUnavailable)
	}
	if r.ClientID != id.ClientID() {
		return "", fmt.Errorf("%w: client id %q is not the user name's identity %q", ErrUnauthorized, truncate(r.ClientID, 64), id)
	}
	if h.opts.HostName != "" && !strings.EqualFold(host, h.opts.HostName) {
		return "", fmt.Errorf("%w: user name names host %q, this hub is %q", ErrUnauthorized, truncate(host, 64), h.opts.HostName)
	}
	if model, ok, err := modelID(r.Username, r.ClientID); err != nil {
		return "", fmt.Errorf("%w: %w", mqtt.ErrBadCredentials, err)
	} else if ok {
		if err := tw.CheckModelID(model); err != nil {
			return "", fmt.Errorf("%w: user name: %w", mqtt.ErrBadCredentials, err)
		}
	}
	if h.opts.DeviceAuth == AuthNone {
		// The identity may not exist yet (register creates it): its
		// generation is noted then, and a session of a deleted one of
		// its id ends first (endUnregistered).
		gen, _, err := h.identityState(context.Background(), id)
		if errors.Is(err, twincli.ErrNotFound) {
			h.endUnregistered(context.Background(), r.ClientID)
		} else if err != nil {
			h.log.Debug("iothub: generation of a connecting device", "device", id.String(), "err", err)
		}
		return gen, nil
	}
	ctx, cancel := h.requestCtx(context.Background())
	defer cancel()
	auth, gen, err := h.identityAuth(ctx, id)
	if err != nil {
		return "", err
	}
	now := time.Now()
	switch {
	case r.HasPassword && strings.HasPrefix(string(r.Password), tokenPrefix):
		tok, err := ParseToken(string(r.Password))
		if err != nil {
			return "", fmt.Errorf("%w: %w", mqtt.ErrBadCredentials, err)
		}
		if err := h.verifyDeviceToken(tok, auth, host, id, now); err != nil {
			return "", err
		}
		h.mu.Lock()
		h.expiries[r.ClientID] = tok.Expiry
		h.mu.Unlock()
		return gen, nil
	case len(r.PeerCertificates) > 0:
		return gen, h.verifyCertificate(r.PeerCertificates, auth, id, now)
	case auth.Type == "none":
		return gen, nil
	case r.HasPassword:
		return "", fmt.Errorf("%w: the password is not a SAS token (%q...)", mqtt.ErrBadCredentials, truncate(string(r.Password), 8))
	}
	return "", fmt.Errorf("%w: neither a SAS token nor a client certificate", mqtt.ErrBadCredentials)
}

// identityAuth reads the identity's authentication from the registry,
// and its generation id (a module's own: a module deleted and created
// again is a new one, its device unchanged).
func (h *Hub) identityAuth(ctx context.Context, id Identity) (twincli.Authentication, string, error) {
	// A module has no status of its own: it is refused while its device
	// is disabled, as IoT Hub does.
	d, err := h.twins.GetDevice(ctx, id.DeviceID)
	if err != nil {
		return twincli.Authentication{}, "", registryErr(id, err)
	}
	if strings.EqualFold(d.Status, "disabled") {
		if id.ModuleID != "" {
			return twincli.Authentication{}, "", fmt.Errorf("%w: module %s: device %s is disabled", ErrUnauthorized, id, id.DeviceID)
		}
		return twincli.Authentication{}, "", fmt.Errorf("%w: device %s is disabled", ErrUnauthorized, id)
	}
	auth, gen := d.Authentication, d.GenerationID
	if id.ModuleID != "" {
		m, err := h.twins.GetModule(ctx, id.DeviceID, id.ModuleID)
		if err != nil {
			return twincli.Authentication{}, "", registryErr(id, err)
		}
		auth, gen = m.Authentication, m.GenerationID
	}
	if auth == nil {
		return twincli.Authentication{Type: "sas"}, gen, nil
	}
	return *auth, gen, nil
}

// registryErr turns a registry lookup failure into a CONNECT refusal.
func registryErr(id Identity, err error) error {
	if errors.Is(err, twincli.ErrNotFound) {
		return fmt.Errorf("%w: %s is not registered", ErrUnauthorized, id)
	}
	var te *twincli.Error
	if errors.As(err, &te) {
		return fmt.Errorf("%w: %s: %w", ErrUnauthorized, id, err)
	}
	return fmt.Errorf("%w: identity registry: %w", mqtt.ErrUnavailable, err)
}

// verifyDeviceToken checks a device's SAS token.
func (h *Hub) verifyDeviceToken(tok *Token, auth twincli.Authentication, host string, id Identity, now time.Time) error {
	if h.opts.HostName != "" {
		host = h.opts.HostName
	}
	if !tok.Grants(host, id.Path()) {
		return fmt.Errorf("%w: the token's resource %q does not cover %s%s", ErrUnauthorized, truncate(tok.Resource, 96), host, id.Path())
	}
	if tok.KeyName != "" {
		p := h.policies[tok.KeyName]
		if p == nil || !p.has(PermDeviceConnect) {
			return fmt.Errorf("%w: policy %q unknown or without deviceConnect", ErrUnauthorized, truncate(tok.KeyName, 64))
		}
		return badCredentials(tok.VerifyBase64(p.Key, now))
	}
	if auth.Type != "" && auth.Type != "sas" || auth.SymmetricKey == nil {
		return fmt.Errorf("%w: %s authenticates with %q, not SAS keys", ErrUnauthorized, id, auth.Type)
	}
	err := tok.VerifyBase64(auth.SymmetricKey.PrimaryKey, now)
	if errors.Is(err, ErrBadSignature) && auth.SymmetricKey.SecondaryKey != "" {
		err = tok.VerifyBase64(auth.SymmetricKey.SecondaryKey, now)
	}
	return badCredentials(err)
}

// badCredentials makes a token failure a 0x86 refusal.
func badCredentials(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", mqtt.ErrBadCredentials, err)
}

// verifyCertificate checks a device's TLS client certificate (the
// handshake proved the device holds its key).
func (h *Hub) verifyCertificate(chain []*x509.Certificate, auth twincli.Authentication, id Identity, now time.Time) error {
	leaf := chain[0]
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return fmt.Errorf("%w: the client certificate is not valid now (%s to %s)", mqtt.ErrBadCredentials,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	switch auth.Type {
	case "selfSigned":
		if auth.X509Thumbprint != nil {
			s1, s256 := sha1.Sum(leaf.Raw), sha256.Sum256(leaf.Raw)
			for _, want := range []string{auth.X509Thumbprint.PrimaryThumbprint, auth.X509Thumbprint.SecondaryThumbprint} {
				if want != "" && (strings.EqualFold(want, hex.EncodeToString(s1[:])) || strings.EqualFold(want, hex.EncodeToString(s256[:]))) {
					return nil
				}
			}
		}
		return fmt.Errorf("%w: the client certificate's thumbprint is not registered for %s", mqtt.ErrBadCredentials, id)
	case "certificateAuthority":
		if h.caPool == nil {
			return fmt.Errorf("%w: no CA is trusted for device certificates (x509_ca_file)", ErrUnauthorized)
		}
		inter := x509.NewCertPool()
		for _, c := range chain[1:] {
			inter.AddCert(c)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: h.caPool, Intermediates: inter, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			return fmt.Errorf("%w: client certificate: %w", mqtt.ErrBadCredentials, err)
		}
		if leaf.Subject.CommonName != id.DeviceID {
			return fmt.Errorf("%w: the certificate names %q, not %q", ErrUnauthorized, truncate(leaf.Subject.CommonName, 64), id.DeviceID)
		}
		return nil
	}
	return fmt.Errorf("%w: %s authenticates with %q, not a certificate", ErrUnauthorized, id, auth.Type)
}

// deviceOf returns the IoT Hub identity of a connected client: its user
// name has the hub's shape and names its client id (authenticate made
// sure of both at CONNECT).
func (h *Hub) deviceOf(c mqtt.ClientInfo) (Identity, bool) {
	_, id, ok := parseUsername(c.Username, c.ClientID)
	if !ok || id.ClientID() != c.ClientID {
		return Identity{}, false
	}
	return id, true
}

// allowedFilters are the subscriptions a device may make. An id with '+'
// or '#' (the registry allows both) has no topic of its own: as a topic
// level it is a wildcard, and device "+" would read every device's
// cloud-to-device messages (it gets none: prepareC2D, PrepareC2D).
func allowedFilters(id Identity) []string {
	filters := []string{twinResFilter, twinDesiredFilter, methodPostFilter}
	if strings.ContainsAny(id.DeviceID, "+#") || strings.ContainsAny(id.ModuleID, "+#") {
		return filters
	}
	own := "devices/" + id.DeviceID + "/messages/devicebound/#"
	if id.ModuleID != "" {
		own = "devices/" + id.DeviceID + "/modules/" + id.ModuleID + "/inputs/#"
	}
	return append(filters, own)
}

// authorize is mqtt.Options.Authorize: a device may subscribe to its own
// replies, requests and cloud-to-device messages and publish its own
// telemetry, nothing else. Other clients are left to the ACL.
func (h *Hub) authorize(c mqtt.ClientInfo, topic string, subscribe bool) error {
	id, ok := h.deviceOf(c)
	if !ok {
		return nil
	}
	if subscribe {
		for _, f := range allowedFilters(id) {
			if covers(f, topic) {
				if f == methodPostFilter {
					// Granted once the connection is recorded: a device
					// whose SUBACK came is found by a method call on
					// any node (InvokeMethod reads connectionState).
					ctx, cancel := h.requestCtx(h.ctx)
					h.watchingDone(ctx, c.ClientID)
					cancel()
				}
				return nil
			}
		}
		return fmt.Errorf("%w: a device subscribes to its own topics only, not %q", ErrUnauthorized, truncate(topic, 96))
	}
	if got, _, ok := eventsIdentity(topic); ok && got == id {
		return nil
	}
	return fmt.Errorf("%w: a device publishes to its own telemetry topic only, not %q", ErrUnauthorized, truncate(topic, 96))
}

// reservedAllowed is the hub's part of mqtt.Options.Reserved: a device
// may use its own topics inside the reserved trees.
func (h *Hub) reservedAllowed(c mqtt.ClientInfo, topic string, subscribe bool) bool {
	_, ok := h.deviceOf(c)
	return ok && h.authorize(c, topic, subscribe) == nil
}

// covers reports whether every topic matching filter sub also matches
// filter rule.
func covers(rule, sub string) bool {
	for {
		rl, rrest, rmore := strings.Cut(rule, "/")
		if rl == "#" {
			return true
		}
		sl, srest, smore := strings.Cut(sub, "/")
		if sl == "#" || sl == "+" && rl != "+" || rl != "+" && rl != sl {
			return false
		}
		if !rmore || !smore {
			return !rmore && !smore || !smore && rrest == "#"
		}
		rule, sub = rrest, srest
	}
}
