/* Start-up without capabilities for the parsers. A daemon started with capabilities (root from
 * a shell, a unit with AmbientCapabilities=) must still bind its sockets and fork the helper's
 * zygote before it drops them, and both need facts from the flags and the config file. So the
 * flags and the file are first read by a child that has dropped every capability (no_new_privs,
 * an empty bounding set); it hands back only those facts, as one fixed-size message that the
 * privileged parent checks field by field; the parent binds and starts the helper, drops its own
 * capabilities, and only then reads flags and file itself. No byte of the config file is ever
 * parsed by a process that holds a capability. --check-config, --help, --version and every bad
 * flag or line are dealt with entirely in the child. */
#pragma once

#include <stdbool.h>

#include "options.h"

/* At most this many --web.listen-address values (and bytes each, with the NUL) in a start with
 * capabilities; more is refused with a message naming the flag. */
#define PRESTART_LISTEN_MAX     128
#define PRESTART_LISTEN_LEN_MAX 256

/* True when the calling thread holds a permitted capability (so prestart_run() is needed). */
bool prestart_needed(void);

/* The front of main(): parses flags and config into *o and validates them; prints what --help,
 * --version, --check-config and errors print. Returns -1 when the daemon should go on (o
 * filled), else the exit status. */
typedef int (*prestart_front_fn)(void *ud, struct dp_options *o);

/* Runs front(ud, ...) in a child without capabilities. Returns the exit status the child ended
 * with when it did not hand the start over (it printed everything), 1 when it could not be run
 * or answered something malformed, or -1 with *ret filled with the privileged facts only
 * (listen addresses, systemd_socket, path.dev, once, log level and format; everything else as
 * defaults, NULL or 0; free with options_free()). Main thread, before any other thread exists;
 * stdio is shared with the child. */
int prestart_run(prestart_front_fn front, void *ud, struct dp_options *ret);

/* After the parent parsed flags and file itself: 0 when o asks for the same listen addresses,
 * socket activation, device directory and mode as the facts it started with (the options marked
 * OPT_PRESTART in the option table; the message carries each of them), else -ESTALE (the config
 * file changed in between). */
int prestart_same(const struct dp_options *facts, const struct dp_options *o);
