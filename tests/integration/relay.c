/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * A TCP relay on loopback that a test can cut and restore (relay.h): one
 * thread copies bytes both ways between each accepted connection and one
 * it opens to the target port; a cut closes them all and the listening
 * socket, as a pulled cable and a host that refuses connections would.
 * While cut, the port stays bound by a socket that does not listen (a
 * connection to it is refused), so that no other process's socket, an
 * outgoing connection's included, takes the port before the restore binds
 * it again: under load it did, and the restore failed with EADDRINUSE.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <check.h>

#include "relay.h"

#define LINK_PAIRS 8

struct link {
	int port;            /* where the edge's bridge connects */
	int target;          /* the centre's port */
	int lfd;             /* listening; -1 while cut */
	int hold;            /* bound to port, not listening, while cut; else -1 */
	int fds[LINK_PAIRS][2];
	size_t n;
	pthread_t thread;
	pthread_mutex_t mu;
	bool stop;
};

/* A socket bound to port on loopback (0: one the kernel chooses), with
 * SO_REUSEPORT, which lets the listener and the cut's holder share it. */
static int bind_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	ck_assert_msg(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "bind %d: %s", port, strerror(errno));
	return fd;
}

static int listen_on(int port)
{
	int fd = bind_on(port);
	ck_assert_int_eq(listen(fd, 8), 0);
	return fd;
}

static int connect_to(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a))){
		close(fd);
		fd = -1;
	}
	return fd;
}

static void close_pair(struct link *l, size_t i)
{
	close(l->fds[i][0]);
	close(l->fds[i][1]);
	l->fds[i][0] = l->fds[--l->n][0];
	l->fds[i][1] = l->fds[l->n][1];
}

/* Copies what comes in on either side of each pair to the other; a pair
 * one side of which ends is closed whole, as a cut cable would be. */
static void *link_run(void *arg)
{
	struct link *l = arg;
	char buf[65536];
	for(;;){
		struct pollfd p[1 + 2 * LINK_PAIRS];
		size_t np = 0;
		pthread_mutex_lock(&l->mu);
		if(l->stop){
			pthread_mutex_unlock(&l->mu);
			return NULL;
		}
		if(l->lfd >= 0) p[np++] = (struct pollfd){ .fd = l->lfd, .events = POLLIN };
		size_t base = np;
		for(size_t i = 0; i < l->n; i++){
			p[np++] = (struct pollfd){ .fd = l->fds[i][0], .events = POLLIN };
			p[np++] = (struct pollfd){ .fd = l->fds[i][1], .events = POLLIN };
		}
		pthread_mutex_unlock(&l->mu);
		if(poll(p, np, 20) <= 0) continue;
		pthread_mutex_lock(&l->mu);
		if(base && l->lfd >= 0 && (p[0].revents & POLLIN)){
			int in = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
			int out = in >= 0 ? connect_to(l->target) : -1;
			if(in >= 0 && out >= 0 && l->n < LINK_PAIRS){
				l->fds[l->n][0] = in;
				l->fds[l->n][1] = out;
				l->n++;
			}else{
				if(in >= 0) close(in);
				if(out >= 0) close(out);
			}
		}
		/* The pairs as polled, unless a cut closed them meanwhile. */
		for(size_t k = base, i = 0; k < np && i < l->n; k += 2, i++){
			if(p[k].fd != l->fds[i][0]) break;
			for(int side = 0; side < 2; side++){
				if(!(p[k + side].revents & (POLLIN | POLLHUP | POLLERR))) continue;
				ssize_t got = read(l->fds[i][side], buf, sizeof(buf));
				bool ok = got > 0;
				for(ssize_t off = 0; ok && off < got;){
					ssize_t w = write(l->fds[i][!side], buf + off, (size_t)(got - off));
					ok = w > 0;
					off += w > 0 ? w : 0;
				}
				if(!ok){
					close_pair(l, i);
					i--;
					k -= 2;
					break;
				}
			}
		}
		pthread_mutex_unlock(&l->mu);
	}
}

struct link *link_new(int target)
{
	struct link *l = calloc(1, sizeof(*l));
	ck_assert_ptr_nonnull(l);
	l->target = target;
	l->hold = -1;
	/* Port 0: the kernel's free port, taken at once (it_free_port's may
	 * be another suite's by the time it is bound). */
	l->lfd = listen_on(0);
	struct sockaddr_in a;
	socklen_t alen = sizeof(a);
	ck_assert_int_eq(getsockname(l->lfd, (struct sockaddr *)&a, &alen), 0);
	l->port = ntohs(a.sin_port);
	pthread_mutex_init(&l->mu, NULL);
	ck_assert_int_eq(pthread_create(&l->thread, NULL, link_run, l), 0);
	return l;
}

/* Closes every connection through l and refuses new ones. */
void link_cut(struct link *l)
{
	pthread_mutex_lock(&l->mu);
	if(l->lfd >= 0){
		/* The port is held before the listener goes. */
		l->hold = bind_on(l->port);
		close(l->lfd);
	}
	l->lfd = -1;
	while(l->n) close_pair(l, 0);
	pthread_mutex_unlock(&l->mu);
}

void link_restore(struct link *l)
{
	pthread_mutex_lock(&l->mu);
	if(l->lfd < 0){
		l->lfd = listen_on(l->port);
		close(l->hold);
		l->hold = -1;
	}
	pthread_mutex_unlock(&l->mu);
}

void link_free(struct link *l)
{
	link_cut(l);
	pthread_mutex_lock(&l->mu);
	if(l->hold >= 0) close(l->hold);
	l->hold = -1;
	l->stop = true;
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

int link_port(const struct link *l)
{
	return l->port;
}
