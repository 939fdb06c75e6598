// Preloaded with --require: resolves the hub's host name (SMARTGO_HUB_HOST)
// to a loopback address (SMARTGO_HUB_IP) without touching /etc/hosts, so the
// SDKs connect by that name (TLS server name, SAS resource) to the SmartGo
// under test. Nothing of the SDKs is changed.
'use strict';
const dns = require('dns');
const host = (process.env.SMARTGO_HUB_HOST || '').toLowerCase();
const ip = process.env.SMARTGO_HUB_IP || '127.0.0.1';
const lookup = dns.lookup;
dns.lookup = function (hostname, options, callback) {
  if (typeof options === 'function') {
    callback = options;
    options = {};
  }
  if (host && typeof hostname === 'string' && hostname.toLowerCase() === host) {
    if (options && options.all) {
      return process.nextTick(callback, null, [{ address: ip, family: 4 }]);
    }
    return process.nextTick(callback, null, ip, 4);
  }
  return lookup.call(dns, hostname, options, callback);
};
