// One accepted HTTP connection: TLS handshake, then request after request, each read under the
// server's caps and deadlines, dispatched to its route and answered in order (http_server.h
// says what is enforced). The session registers itself in the core's connection registry and
// leaves it when it ends.
//
// Threading: everything runs on the server's I/O thread; a kPool route runs on a pool thread and
// reaches the session only through its Responder.
#pragma once

#include <boost/asio/ip/tcp.hpp>

#include <string>

#include "common/http/connection_limits.h"
#include "common/http/server_core.h"

namespace tessera::http {

// Starts serving `socket` (plain HTTP, or HTTPS when core->tls is set). I/O thread only.
void StartSession(ServerCore* core, boost::asio::ip::tcp::socket socket,
                  ConnectionLimits::Slot slot, std::string peer);

}  // namespace tessera::http
