// Package twin is the Go API of SmartGo's device identities and twins
// (the engine is package twin at the module root; docs/twins.md describes
// documents, rules and queries). One Client serves both sides:
//
// The back end manages identities and twins and queries them:
//
//	c, err := twin.New(twin.Options{Registries: []string{"127.0.0.1:9876"}})
//	dev, err := c.CreateDevice(ctx, &twin.Device{DeviceID: "pump-17"})   // SAS keys generated; C2D session prepared
//	t, err := c.UpdateTwin(ctx, "pump-17", "", []byte(`{"tags":{"site":"north"},
//	        "properties":{"desired":{"rpm":1200}}}`), t.Etag)             // If-Match; 412 on a race
//	page, err := c.Query(ctx, "SELECT * FROM devices WHERE tags.site = 'north'", twin.QueryOptions{})
//	more, err := c.Query(ctx, q, twin.QueryOptions{Continuation: page.Continuation})
//
// A front end that hosts device connections (the MQTT bridge's IoT Hub
// surface) acts for its devices and receives their desired changes:
//
//	c, _ := twin.New(twin.Options{Registries: regs, OnDesired: func(list []twin.DesiredChange) {
//	        for _, d := range list {   // d.Patch includes "$version"
//	                publish(d.DeviceID, d.ModuleID, "$iothub/twin/PATCH/properties/desired/?$version="+
//	                        strconv.FormatInt(d.Version, 10), d.Patch)
//	        }
//	}})
//	dev, err := c.GetDevice(ctx, id)                 // keys and status for SAS auth
//	err = c.SetConnected(ctx, id, "", connID, model) // connectionState, modelId, deviceConnected event
//	err = c.Watch(ctx, id, "")                       // desired changes to OnDesired
//	props, err := c.GetProperties(ctx, id, "")       // $iothub/twin/GET: props.JSON is the 200 payload
//	ver, err := c.PatchReported(ctx, id, "", body, 0) // PATCH reported: 204 with $version=ver
//	err = c.Unwatch(ctx, id, "")
//	err = c.SetDisconnected(ctx, id, "", connID)     // ErrPrecondition: it reconnected elsewhere
//
// Errors: an operation that fails returns an *Error (Status 400, 403, 404,
// 409, 412 or 413; Code; Msg naming the rule) that errors.Is matches with
// ErrInvalid, ErrQuota, ErrNotFound, ErrExists, ErrPrecondition or
// ErrTooLarge; nothing changed. Transport failures are ErrUnavailable
// (nothing changed; retry), ErrFailed, ErrNoRoute or ErrClosed.
//
// Routing: twins live in the shards of the broker topic SystemTopic; the
// global shard list is every (broker name, queue) of that topic sorted by
// broker name then queue, and a device (with its modules) lives in shard
// twin.ShardOf(deviceId, len(list)). Requests go to the shard's master with
// the SmartGo-only remoting codes TwinInvoke (9120), TwinWatch (9122) and
// come back as TwinNotify (9121) pushes (remoting/protocol/twin.go; bodies
// in twin/doc.go). A broker in the client's own process (Options.Local)
// is called directly. When the owner refuses a request (a slave, a route
// that moved after a failover) the route is looked up again and the
// request sent once more.
//
// Watches live in the brokers' memory per connection: the client keeps
// the set it watches and registers it again when a connection closes, or
// when a broker's epoch (drawn at each start) changes, which the watch
// loop checks every WatchCheck.
package twin
