/* SPDX-License-Identifier: EPL-2.0 OR BSD-3-Clause */
/*
 * The file side of the state (see state.h): whole-file reads, atomic
 * replacement (write to path.tmp, fsync, rename, fsync the directory), and
 * synced appends to the journal. Kept apart from the format so that the
 * format's tests need no files.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/state.h"

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while(n > 0){
		ssize_t w = write(fd, p, n);
		if(w < 0){
			if(errno == EINTR) continue;
			return errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int state_file__write_with(const char *path, state_fill_fn *fill, void *ctx, char *err, size_t errlen)
{
	char tmp[4096];
	if(snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp)){
		snprintf(err, errlen, "path too long");
		return ENAMETOOLONG;
	}
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if(fd < 0){
		int rc = errno;
		snprintf(err, errlen, "cannot create \"%s\": %s", tmp, strerror(rc));
		return rc;
	}
	int rc = fill(ctx, fd);
	if(rc == 0 && fsync(fd)) rc = errno;
	if(close(fd) && rc == 0) rc = errno;
	if(rc == 0 && rename(tmp, path)) rc = errno;
	if(rc){
		snprintf(err, errlen, "cannot write \"%s\": %s", path, rc == ENOMEM ? "out of memory" : strerror(rc));
		unlink(tmp);
		return rc;
	}
	/* The rename is durable once the directory is. */
	state_file__sync_dir(path);
	return 0;
}

struct bytes {
	const uint8_t *data;
	size_t len;
};

static int fill_bytes(void *ctx, int fd)
{
	const struct bytes *b = ctx;
	return write_all(fd, b->data, b->len);
}

int state_file__write(const char *path, const uint8_t *data, size_t len, char *err, size_t errlen)
{
	struct bytes b = { data, len };
	return state_file__write_with(path, fill_bytes, &b, err, errlen);
}

int state_file__write_fd(int fd, const uint8_t *data, size_t len)
{
	return write_all(fd, data, len);
}

void state_file__sync_dir(const char *path)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if(dfd >= 0){
		(void)fsync(dfd);
		close(dfd);
	}
}

/* Opens path for reading and stats it: 0 with *fd -1 when there is no
 * file, 0 with *fd open (the caller's to close), or an errno with err set. */
static int open_for_reading(const char *path, int *fd, struct stat *st, char *err, size_t errlen)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if(*fd < 0){
		if(errno == ENOENT) return 0;
		int rc = errno;
		snprintf(err, errlen, "cannot open \"%s\": %s", path, strerror(rc));
		return rc;
	}
	if(fstat(*fd, st)){
		int rc = errno;
		close(*fd);
		*fd = -1;
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(rc));
		return rc;
	}
	return 0;
}

/* Reads the open fd (st from it) into a buffer of its own; closes fd. */
static int read_open_file(const char *path, int fd, const struct stat *st, uint8_t **data, size_t *len,
		char *err, size_t errlen)
{
	size_t size = (size_t)st->st_size;
	uint8_t *buf = malloc(size ? size : 1);
	if(buf == NULL){
		close(fd);
		snprintf(err, errlen, "out of memory reading \"%s\"", path);
		return ENOMEM;
	}
	size_t got = 0;
	int rc = 0;
	while(got < size){
		ssize_t n = read(fd, buf + got, size - got);
		if(n < 0 && errno == EINTR) continue;
		if(n < 0) rc = errno;
		if(n <= 0) break;
		got += (size_t)n;
	}
	/* A directory opens, but does not read. */
	if(rc == 0 && size == 0){
		char probe;
		if(read(fd, &probe, 1) < 0) rc = errno;
	}
	close(fd);
	if(rc){
		free(buf);
		snprintf(err, errlen, "cannot read \"%s\": %s", path, strerror(rc));
		return rc;
	}
	*data = buf;
	*len = got;
	return 0;
}

int state_file__read(const char *path, uint8_t **data, size_t *len, char *err, size_t errlen)
{
	*data = NULL;
	*len = 0;
	int fd;
	struct stat st;
	int rc = open_for_reading(path, &fd, &st, err, errlen);
	if(rc || fd < 0) return rc;
	return read_open_file(path, fd, &st, data, len, err, errlen);
}

int state_file__load(const char *path, struct state_bytes *b, char *err, size_t errlen)
{
	memset(b, 0, sizeof(*b));
	int fd;
	struct stat st;
	int rc = open_for_reading(path, &fd, &st, err, errlen);
	if(rc || fd < 0) return rc;
	if(S_ISREG(st.st_mode) && st.st_size > 0){
		/* Mapped whole at once: page by page, a start from a million
		 * records took a fault every few records. */
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
		if(m != MAP_FAILED){
			close(fd);
			(void)madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
			b->map = m;
			b->data = m;
			b->len = (size_t)st.st_size;
			return 0;
		}
	}
	rc = read_open_file(path, fd, &st, &b->heap, &b->len, err, errlen);
	b->data = b->heap;
	return rc;
}

void state_file__unload(struct state_bytes *b)
{
	if(b->map) (void)munmap(b->map, b->len);
	free(b->heap);
	memset(b, 0, sizeof(*b));
}

int state_file__append_nosync(int fd, const uint8_t *data, size_t len)
{
	return write_all(fd, data, len);
}

int state_file__append(int fd, const uint8_t *data, size_t len)
{
	int rc = write_all(fd, data, len);
	if(rc == 0 && fdatasync(fd)) rc = errno;
	return rc;
}
