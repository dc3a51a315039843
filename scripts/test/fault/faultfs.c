/*-------------------------------------------------------------------------
 *
 * faultfs.c
 *	  A FUSE passthrough file system that fails chosen operations with a
 *	  real errno, for make fault-check (scripts/test/fault-check.sh).
 *
 * faultfs mounts a backing directory at a mount point and passes every
 * operation through to it: what is written through the mount is in the
 * backing directory, and an fsync through the mount fsyncs the backing
 * file.  It uses libfuse's low-level API: each inode the kernel knows is an
 * O_PATH descriptor of the backing inode, so that a file unlinked while
 * open (PostgreSQL does that) keeps working as on a local file system.
 * Files are opened with FUSE's direct_io, so that every read and write of a
 * process reaches this daemon, with no page cache of the mount in between:
 * a read fault fails the read that asked for the block, not a later one,
 * and a write fault fails the write(2) itself.
 *
 * Faults are rules in a control file, which faultfs re-reads whenever it
 * changed (its inode, size or mtime; replace it with rename(2) to change it
 * atomically): an operation obeys the rules of the file as it was when the
 * operation arrived.  One rule per line:
 *
 *	  OP ERRNO PATTERN [count=N] [blocks=A-B] [overwrite] [short=N]
 *
 *	  OP		read, write, fsync (fsync and fdatasync, of files and of
 *				directories) or fallocate
 *	  ERRNO		EIO, ENOSPC, EROFS, EDQUOT, EPERM, EACCES, or a number
 *	  PATTERN	fnmatch(3) pattern (no flags: '*' matches '/') against the
 *				path inside the mount when the file was opened, starting
 *				with '/', e.g. '/pgdata/base/5/16384'
 *	  count=N	fail at most N operations, then pass them through
 *	  blocks=A-B	only reads, writes and fallocates that touch 8 kB block
 *				A..B of the file (inclusive)
 *	  overwrite	only writes that lie within the file's current size (a
 *				write that extends the file passes)
 *	  short=N	writes: the first write the rule fails writes its first N
 *				bytes (half of it if it is not longer than N) and returns
 *				that short count, as a file system that fills up does;
 *				the later ones fail with ERRNO
 *
 * '#' starts a comment.  An empty or missing control file means no faults.
 * Each failed operation is appended as one line to the hit log:
 *
 *	  TIME hit rule=LINE op=OP errno=NAME path=PATH off=O len=L blocks=A-B
 *	  [short=WRITTEN] tid=T tgid=G comm=COMM cmd=CMDLINE
 *
 * (short=WRITTEN: a short write of WRITTEN bytes, not an error.)
 *
 * tid is the thread that issued the request (an io_uring worker thread is a
 * thread of the process that submitted the I/O), tgid its process, and cmd
 * that process's command line, i.e. PostgreSQL's process title
 * ("postgres: checkpointer", "postgres: io worker 0", ...).
 *
 * Usage (foreground; exits on SIGINT, SIGTERM and SIGHUP):
 *
 *	  faultfs --backing=DIR --control=FILE --log=FILE [FUSE options] MOUNTPOINT
 *
 * MOUNTPOINT may be /dev/fd/N, a /dev/fuse descriptor that root already
 * mounted (scripts/test/fault-check.sh does that, so that faultfs runs
 * unprivileged on a machine whose /dev/fuse only root may open).
 *
 *-------------------------------------------------------------------------
 */
#define FUSE_USE_VERSION 312
#define _GNU_SOURCE

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <fuse_lowlevel.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#define FAULT_BLCKSZ 8192

/* how long the kernel may cache names and attributes, in seconds */
#define FAULT_CACHE_TIMEOUT 1.0

typedef enum FaultOp
{
	FAULT_OP_READ,
	FAULT_OP_WRITE,
	FAULT_OP_FSYNC,
	FAULT_OP_FALLOCATE,
} FaultOp;

#define FAULT_NUM_OPS 4

static const char *const fault_op_names[FAULT_NUM_OPS] = {
	"read", "write", "fsync", "fallocate"
};

typedef struct FaultRule
{
	int			lineno;			/* line in the control file */
	FaultOp		op;
	int			err;			/* errno to fail with */
	char	   *pattern;
	long		remaining;		/* failures left; -1: no limit */
	bool		has_blocks;
	off_t		first_block;
	off_t		last_block;
	bool		overwrite_only;
	long		short_bytes;	/* -1: no short write */
	bool		short_done;		/* the short write happened */
} FaultRule;

/* An inode the kernel knows: fuse_ino_t is its address. */
typedef struct FaultInode
{
	int			fd;				/* O_PATH descriptor of the backing inode */
	dev_t		dev;
	ino_t		ino;
	uint64_t	nlookup;		/* the kernel's references */
	struct FaultInode *next;	/* hash chain */
} FaultInode;

/* An open file or directory: fuse_file_info.fh is its address. */
typedef struct FaultFile
{
	int			fd;
	DIR		   *dir;			/* directories */
	struct dirent *entry;		/* directories: entry that did not fit */
	off_t		offset;			/* directories: position of dir */
	char		path[];			/* as opened, inside the mount */
} FaultFile;

static struct
{
	char	   *backing;
	char	   *control;
	char	   *log;
} options;

static FaultInode root_inode;
static char *backing_path;		/* realpath of the backing directory */
static size_t backing_len;
static int	log_fd = -1;

#define NUM_BUCKETS 4096
static pthread_mutex_t inodes_lock = PTHREAD_MUTEX_INITIALIZER;
static FaultInode *inode_buckets[NUM_BUCKETS];

/* the rules, and the control file they were read from */
static pthread_mutex_t rules_lock = PTHREAD_MUTEX_INITIALIZER;
static FaultRule *rules = NULL;
static int	nrules = 0;
static bool control_seen = false;
static struct stat control_st;

static const struct
{
	const char *name;
	int			err;
}			errno_names[] = {
	{"EIO", EIO},
	{"ENOSPC", ENOSPC},
	{"EROFS", EROFS},
	{"EDQUOT", EDQUOT},
	{"EPERM", EPERM},
	{"EACCES", EACCES},
};

#define lengthof(array) (sizeof(array) / sizeof((array)[0]))

static const char *
errno_name(int err, char *buf, size_t size)
{
	for (size_t i = 0; i < lengthof(errno_names); i++)
	{
		if (errno_names[i].err == err)
			return errno_names[i].name;
	}
	snprintf(buf, size, "%d", err);
	return buf;
}

static FaultInode *
get_inode(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &root_inode;
	return (FaultInode *) (uintptr_t) ino;
}

static FaultFile *
get_file(struct fuse_file_info *fi)
{
	return (FaultFile *) (uintptr_t) fi->fh;
}

/* "/proc/self/fd/N": a path that reopens an O_PATH descriptor's inode */
static void
proc_path(int fd, char *buf, size_t size)
{
	snprintf(buf, size, "/proc/self/fd/%d", fd);
}

/* ----------------------------------------------------------------
 * The rules
 * ----------------------------------------------------------------
 */

static void
free_rules(void)
{
	for (int i = 0; i < nrules; i++)
		free(rules[i].pattern);
	free(rules);
	rules = NULL;
	nrules = 0;
}

/*
 * Parse one line of the control file into *rule.  Returns false for an
 * empty line, and, with a message on stderr, for a malformed one (which is
 * then ignored).
 */
static bool
parse_rule(char *line, int lineno, FaultRule *rule)
{
	char	   *save = NULL;
	char	   *tok;
	char	   *end;
	int			field = 0;

	memset(rule, 0, sizeof(*rule));
	rule->lineno = lineno;
	rule->remaining = -1;
	rule->short_bytes = -1;

	for (tok = strtok_r(line, " \t\r\n", &save); tok != NULL;
		 tok = strtok_r(NULL, " \t\r\n", &save), field++)
	{
		if (field == 0)
		{
			int			i;

			for (i = 0; i < FAULT_NUM_OPS; i++)
			{
				if (strcmp(tok, fault_op_names[i]) == 0)
					break;
			}
			if (i == FAULT_NUM_OPS)
			{
				fprintf(stderr, "faultfs: control line %d: unknown operation \"%s\"\n",
						lineno, tok);
				goto bad;
			}
			rule->op = (FaultOp) i;
		}
		else if (field == 1)
		{
			for (size_t i = 0; i < lengthof(errno_names); i++)
			{
				if (strcmp(tok, errno_names[i].name) == 0)
					rule->err = errno_names[i].err;
			}
			if (rule->err == 0)
			{
				long		n = strtol(tok, &end, 10);

				if (*end != '\0' || n <= 0 || n > 4095)
				{
					fprintf(stderr, "faultfs: control line %d: bad errno \"%s\"\n",
							lineno, tok);
					goto bad;
				}
				rule->err = (int) n;
			}
		}
		else if (field == 2)
			rule->pattern = strdup(tok);
		else if (strncmp(tok, "count=", 6) == 0)
		{
			rule->remaining = strtol(tok + 6, &end, 10);
			if (*end != '\0' || rule->remaining < 0)
			{
				fprintf(stderr, "faultfs: control line %d: bad \"%s\"\n", lineno, tok);
				goto bad;
			}
		}
		else if (strncmp(tok, "blocks=", 7) == 0)
		{
			rule->has_blocks = true;
			rule->first_block = strtoll(tok + 7, &end, 10);
			if (*end == '-')
				rule->last_block = strtoll(end + 1, &end, 10);
			else
				rule->last_block = rule->first_block;
			if (*end != '\0' || rule->first_block < 0 ||
				rule->last_block < rule->first_block)
			{
				fprintf(stderr, "faultfs: control line %d: bad \"%s\"\n", lineno, tok);
				goto bad;
			}
		}
		else if (strcmp(tok, "overwrite") == 0)
			rule->overwrite_only = true;
		else if (strncmp(tok, "short=", 6) == 0)
		{
			rule->short_bytes = strtol(tok + 6, &end, 10);
			if (*end != '\0' || rule->short_bytes <= 0)
			{
				fprintf(stderr, "faultfs: control line %d: bad \"%s\"\n", lineno, tok);
				goto bad;
			}
		}
		else
		{
			fprintf(stderr, "faultfs: control line %d: unknown option \"%s\"\n",
					lineno, tok);
			goto bad;
		}
	}
	if (field == 0)
		return false;
	if (field < 3)
	{
		fprintf(stderr, "faultfs: control line %d: need OP ERRNO PATTERN\n", lineno);
		goto bad;
	}
	return true;

bad:
	free(rule->pattern);
	rule->pattern = NULL;
	return false;
}

/*
 * Re-read the control file if it changed since we last read it.  Caller
 * holds rules_lock.
 */
static void
refresh_rules(void)
{
	struct stat st;
	FILE	   *f;
	char		line[4096];
	int			lineno = 0;

	if (stat(options.control, &st) != 0)
	{
		/* no control file: no faults */
		free_rules();
		control_seen = false;
		return;
	}
	if (control_seen &&
		st.st_ino == control_st.st_ino &&
		st.st_dev == control_st.st_dev &&
		st.st_size == control_st.st_size &&
		st.st_mtim.tv_sec == control_st.st_mtim.tv_sec &&
		st.st_mtim.tv_nsec == control_st.st_mtim.tv_nsec)
		return;

	free_rules();
	control_seen = true;
	control_st = st;
	f = fopen(options.control, "re");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL)
	{
		char	   *hash = strchr(line, '#');
		FaultRule	rule;
		FaultRule  *newrules;

		lineno++;
		if (hash != NULL)
			*hash = '\0';
		if (!parse_rule(line, lineno, &rule))
			continue;
		newrules = realloc(rules, sizeof(FaultRule) * (nrules + 1));
		if (newrules == NULL)
		{
			free(rule.pattern);
			fprintf(stderr, "faultfs: out of memory reading control file\n");
			break;
		}
		rules = newrules;
		rules[nrules++] = rule;
	}
	fclose(f);
}

/* Read a small /proc file into buf, NULs and newlines turned into spaces. */
static void
read_proc(pid_t pid, const char *what, char *buf, size_t size)
{
	char		path[64];
	int			fd;
	ssize_t		n;

	buf[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	for (ssize_t i = 0; i < n; i++)
	{
		if (buf[i] == '\0' || buf[i] == '\n')
			buf[i] = ' ';
	}
	while (n > 0 && buf[n - 1] == ' ')
		buf[--n] = '\0';
}

/* Append one line for a failed operation to the hit log. */
static void
log_hit(fuse_req_t req, const FaultRule *rule, FaultOp op, const char *path,
		off_t offset, size_t len, size_t short_len)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	pid_t		tid = ctx ? ctx->pid : 0;
	pid_t		tgid = tid;
	char		status[4096];
	char		comm[64];
	char		cmd[256];
	char		errbuf[16];
	char		line[1024];
	char		shortbuf[32] = "";
	struct timeval tv;
	char	   *p;
	int			n;

	read_proc(tid, "status", status, sizeof(status));
	if ((p = strstr(status, "Tgid:")) != NULL)
		tgid = (pid_t) strtol(p + 5, NULL, 10);
	read_proc(tid, "comm", comm, sizeof(comm));
	read_proc(tgid, "cmdline", cmd, sizeof(cmd));

	if (short_len > 0)
		snprintf(shortbuf, sizeof(shortbuf), " short=%zu", short_len);
	gettimeofday(&tv, NULL);
	n = snprintf(line, sizeof(line),
				 "%ld.%06ld hit rule=%d op=%s errno=%s path=%s off=%lld len=%zu "
				 "blocks=%lld-%lld%s tid=%d tgid=%d comm=%s cmd=%s\n",
				 (long) tv.tv_sec, (long) tv.tv_usec, rule->lineno,
				 fault_op_names[op], errno_name(rule->err, errbuf, sizeof(errbuf)),
				 path, (long long) offset, len,
				 (long long) (offset / FAULT_BLCKSZ),
				 (long long) ((len > 0 ? offset + (off_t) len - 1 : offset) / FAULT_BLCKSZ),
				 shortbuf, (int) tid, (int) tgid, comm[0] ? comm : "?", cmd[0] ? cmd : "?");
	if (n >= (int) sizeof(line))
	{
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	if (log_fd >= 0 && write(log_fd, line, n) != n)
		fprintf(stderr, "faultfs: could not write hit log: %s\n", strerror(errno));
}

/*
 * Does a rule fail this operation?  Returns 0, or the errno to fail it with
 * (after logging the hit and counting it against the rule).  offset and len
 * are the byte range of a read, write or fallocate (0 and 0 for an fsync);
 * fd is the backing file, for "overwrite".  For a write, *short_len (if not
 * NULL) is set to the bytes to write if the rule makes it a short write
 * instead (the function then returns 0), and to 0 otherwise.
 */
static int
check_fault(fuse_req_t req, FaultOp op, const FaultFile *file,
			off_t offset, size_t len, size_t *short_len)
{
	int			result = 0;

	if (short_len != NULL)
		*short_len = 0;

	pthread_mutex_lock(&rules_lock);
	refresh_rules();
	for (int i = 0; i < nrules; i++)
	{
		FaultRule  *rule = &rules[i];

		if (rule->op != op || rule->remaining == 0)
			continue;
		if (fnmatch(rule->pattern, file->path, 0) != 0)
			continue;
		if (rule->has_blocks && op != FAULT_OP_FSYNC)
		{
			off_t		first = offset / FAULT_BLCKSZ;
			off_t		last = (len > 0 ? offset + (off_t) len - 1 : offset) / FAULT_BLCKSZ;

			if (last < rule->first_block || first > rule->last_block)
				continue;
		}
		if (rule->overwrite_only && op == FAULT_OP_WRITE)
		{
			struct stat st;

			if (fstat(file->fd, &st) != 0 || offset + (off_t) len > st.st_size)
				continue;
		}
		if (rule->remaining > 0)
			rule->remaining--;
		if (op == FAULT_OP_WRITE && short_len != NULL &&
			rule->short_bytes > 0 && !rule->short_done && len > 1)
		{
			rule->short_done = true;
			*short_len = len > (size_t) rule->short_bytes ?
				(size_t) rule->short_bytes : len / 2;
		}
		else
			result = rule->err;
		log_hit(req, rule, op, file->path, offset, len,
				short_len ? *short_len : 0);
		break;
	}
	pthread_mutex_unlock(&rules_lock);
	return result;
}

/* ----------------------------------------------------------------
 * Inodes
 * ----------------------------------------------------------------
 */

static size_t
inode_hash(dev_t dev, ino_t ino)
{
	return (size_t) ((ino * 0x9E3779B97F4A7C15ULL) ^ dev) % NUM_BUCKETS;
}

/*
 * Look name up in parent, and fill *e for the kernel: the inode gains one
 * reference (nlookup).  Returns 0 or an errno.
 */
static int
do_lookup(fuse_ino_t parent, const char *name, struct fuse_entry_param *e)
{
	FaultInode *dir = get_inode(parent);
	FaultInode *inode;
	int			fd;
	size_t		h;

	memset(e, 0, sizeof(*e));
	e->attr_timeout = FAULT_CACHE_TIMEOUT;
	e->entry_timeout = FAULT_CACHE_TIMEOUT;

	fd = openat(dir->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
	{
		int			save_errno = errno;

		close(fd);
		return save_errno;
	}

	h = inode_hash(e->attr.st_dev, e->attr.st_ino);
	pthread_mutex_lock(&inodes_lock);
	for (inode = inode_buckets[h]; inode != NULL; inode = inode->next)
	{
		if (inode->dev == e->attr.st_dev && inode->ino == e->attr.st_ino)
			break;
	}
	if (inode != NULL)
	{
		inode->nlookup++;
		close(fd);
	}
	else
	{
		inode = calloc(1, sizeof(FaultInode));
		if (inode == NULL)
		{
			pthread_mutex_unlock(&inodes_lock);
			close(fd);
			return ENOMEM;
		}
		inode->fd = fd;
		inode->dev = e->attr.st_dev;
		inode->ino = e->attr.st_ino;
		inode->nlookup = 1;
		inode->next = inode_buckets[h];
		inode_buckets[h] = inode;
	}
	pthread_mutex_unlock(&inodes_lock);

	e->ino = (fuse_ino_t) (uintptr_t) inode;
	return 0;
}

static void
forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	FaultInode *inode = get_inode(ino);
	FaultInode **prev;

	if (inode == &root_inode)
		return;

	pthread_mutex_lock(&inodes_lock);
	if (nlookup > inode->nlookup)
		nlookup = inode->nlookup;
	inode->nlookup -= nlookup;
	if (inode->nlookup == 0)
	{
		prev = &inode_buckets[inode_hash(inode->dev, inode->ino)];
		while (*prev != inode)
			prev = &(*prev)->next;
		*prev = inode->next;
		close(inode->fd);
		free(inode);
	}
	pthread_mutex_unlock(&inodes_lock);
}

/*
 * The path of an open descriptor inside the mount, from /proc: the backing
 * path without the backing directory.
 */
static FaultFile *
new_file(int fd)
{
	char		link[64];
	char		target[PATH_MAX];
	ssize_t		n;
	const char *path;
	FaultFile  *file;

	proc_path(fd, link, sizeof(link));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		n = 0;
	target[n] = '\0';
	path = target;
	if (strncmp(target, backing_path, backing_len) == 0 &&
		(target[backing_len] == '/' || target[backing_len] == '\0'))
		path = target + backing_len;
	if (path[0] == '\0')
		path = "/";

	file = calloc(1, offsetof(FaultFile, path) + strlen(path) + 1);
	if (file == NULL)
		return NULL;
	file->fd = fd;
	strcpy(file->path, path);
	return file;
}

/* ----------------------------------------------------------------
 * The operations
 * ----------------------------------------------------------------
 */

static void
faultfs_init(void *userdata, struct fuse_conn_info *conn)
{
	(void) userdata;
	/* no page cache for written data (it is off by default; stay explicit) */
	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;

	/*
	 * No asynchronous direct I/O: with it, the kernel turns a short write
	 * submitted asynchronously (io_uring) into EIO (fuse_get_res_by_io()),
	 * so that a "short=" rule could not show io_uring a short write.  The
	 * kernel then executes such writes synchronously in io_uring's worker
	 * thread, which returns what this daemon returned.
	 */
	conn->want &= ~FUSE_CAP_ASYNC_DIO;
}

static void
faultfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int			err = do_lookup(parent, name, &e);

	if (err != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void
faultfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void
faultfs_forget_multi(fuse_req_t req, size_t count,
					 struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		forget_one(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void
faultfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;

	(void) fi;
	if (fstatat(get_inode(ino)->fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_attr(req, &st, FAULT_CACHE_TIMEOUT);
}

static void
faultfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
				int to_set, struct fuse_file_info *fi)
{
	FaultInode *inode = get_inode(ino);
	int			ffd = fi ? get_file(fi)->fd : -1;
	char		path[64];
	int			rc;

	proc_path(inode->fd, path, sizeof(path));

	if (to_set & FUSE_SET_ATTR_MODE)
	{
		rc = ffd >= 0 ? fchmod(ffd, attr->st_mode) : chmod(path, attr->st_mode);
		if (rc != 0)
			goto err;
	}
	if (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
	{
		uid_t		uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t) -1;
		gid_t		gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t) -1;

		if (fchownat(inode->fd, "", uid, gid,
					 AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
			goto err;
	}
	if (to_set & FUSE_SET_ATTR_SIZE)
	{
		rc = ffd >= 0 ? ftruncate(ffd, attr->st_size) : truncate(path, attr->st_size);
		if (rc != 0)
			goto err;
	}
	if (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))
	{
		struct timespec tv[2];

		tv[0].tv_sec = tv[1].tv_sec = 0;
		tv[0].tv_nsec = tv[1].tv_nsec = UTIME_OMIT;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			tv[0].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_ATIME)
			tv[0] = attr->st_atim;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			tv[1].tv_nsec = UTIME_NOW;
		else if (to_set & FUSE_SET_ATTR_MTIME)
			tv[1] = attr->st_mtim;
		rc = ffd >= 0 ? futimens(ffd, tv) : utimensat(AT_FDCWD, path, tv, 0);
		if (rc != 0)
			goto err;
	}
	faultfs_getattr(req, ino, fi);
	return;

err:
	fuse_reply_err(req, errno);
}

static void
faultfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char		buf[PATH_MAX + 1];
	ssize_t		n = readlinkat(get_inode(ino)->fd, "", buf, sizeof(buf) - 1);

	if (n < 0)
		fuse_reply_err(req, errno);
	else
	{
		buf[n] = '\0';
		fuse_reply_readlink(req, buf);
	}
}

/* reply to a call that created name in parent (rc is the call's result) */
static void
reply_made(fuse_req_t req, int rc, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	int			err;

	if (rc != 0)
	{
		fuse_reply_err(req, errno);
		return;
	}
	err = do_lookup(parent, name, &e);
	if (err != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_entry(req, &e);
}

static void
faultfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			  mode_t mode, dev_t rdev)
{
	reply_made(req, mknodat(get_inode(parent)->fd, name, mode, rdev), parent, name);
}

static void
faultfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	reply_made(req, mkdirat(get_inode(parent)->fd, name, mode), parent, name);
}

static void
faultfs_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
				const char *name)
{
	reply_made(req, symlinkat(target, get_inode(parent)->fd, name), parent, name);
}

static void
faultfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
			 const char *newname)
{
	char		path[64];

	/* linkat(AT_EMPTY_PATH) needs a capability; the /proc path does not */
	proc_path(get_inode(ino)->fd, path, sizeof(path));
	reply_made(req, linkat(AT_FDCWD, path, get_inode(newparent)->fd, newname,
						   AT_SYMLINK_FOLLOW),
			   newparent, newname);
}

static void
faultfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(get_inode(parent)->fd, name, 0) == 0 ? 0 : errno);
}

static void
faultfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, unlinkat(get_inode(parent)->fd, name, AT_REMOVEDIR) == 0 ?
				   0 : errno);
}

static void
faultfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			   fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	fuse_reply_err(req, renameat2(get_inode(parent)->fd, name,
								  get_inode(newparent)->fd, newname, flags) == 0 ?
				   0 : errno);
}

/* set up fi for the descriptor fd just opened; returns 0 or an errno */
static int
attach_file(int fd, struct fuse_file_info *fi)
{
	FaultFile  *file = new_file(fd);

	if (file == NULL)
	{
		close(fd);
		return ENOMEM;
	}
	fi->fh = (uint64_t) (uintptr_t) file;
	fi->direct_io = 1;
	fi->keep_cache = 0;
	return 0;
}

static void
faultfs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			   mode_t mode, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	int			fd;
	int			err;

	fd = openat(get_inode(parent)->fd, name,
				(fi->flags | O_CREAT | O_CLOEXEC) & ~O_NOFOLLOW, mode);
	if (fd < 0)
	{
		fuse_reply_err(req, errno);
		return;
	}
	if ((err = attach_file(fd, fi)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	if ((err = do_lookup(parent, name, &e)) != 0)
	{
		close(fd);
		free(get_file(fi));
		fuse_reply_err(req, err);
		return;
	}
	fuse_reply_create(req, &e, fi);
}

static void
faultfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	char		path[64];
	int			fd;
	int			err;

	proc_path(get_inode(ino)->fd, path, sizeof(path));
	fd = open(path, (fi->flags | O_CLOEXEC) & ~(O_NOFOLLOW | O_CREAT | O_EXCL));
	if (fd < 0)
	{
		fuse_reply_err(req, errno);
		return;
	}
	if ((err = attach_file(fd, fi)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_open(req, fi);
}

static void
faultfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			 struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);
	char	   *buf;
	ssize_t		n;
	int			err;

	(void) ino;
	if ((err = check_fault(req, FAULT_OP_READ, file, off, size, NULL)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL)
	{
		fuse_reply_err(req, ENOMEM);
		return;
	}
	do
		n = pread(file->fd, buf, size, off);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, n);
	free(buf);
}

static void
faultfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
			  off_t off, struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);
	size_t		done = 0;
	size_t		short_len;
	int			err;

	(void) ino;
	if ((err = check_fault(req, FAULT_OP_WRITE, file, off, size, &short_len)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	if (short_len > 0)
		size = short_len;
	while (done < size)
	{
		ssize_t		n = pwrite(file->fd, buf + done, size - done, off + done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
		{
			/* report the part written, as a short write(2) would */
			if (done == 0)
			{
				fuse_reply_err(req, errno);
				return;
			}
			break;
		}
		if (n == 0)
			break;
		done += n;
	}
	fuse_reply_write(req, done);
}

/* close(2) of one of the caller's descriptors: report what close reports */
static void
faultfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	int			fd;

	(void) ino;
	fd = dup(get_file(fi)->fd);
	if (fd < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_err(req, close(fd) == 0 ? 0 : errno);
}

static void
faultfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);

	(void) ino;
	close(file->fd);
	free(file);
	fuse_reply_err(req, 0);
}

static void
do_fsync(fuse_req_t req, FaultFile *file, int datasync)
{
	int			err;
	int			rc;

	if ((err = check_fault(req, FAULT_OP_FSYNC, file, 0, 0, NULL)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	rc = datasync ? fdatasync(file->fd) : fsync(file->fd);
	fuse_reply_err(req, rc == 0 ? 0 : errno);
}

static void
faultfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
			  struct fuse_file_info *fi)
{
	(void) ino;
	do_fsync(req, get_file(fi), datasync);
}

static void
faultfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
				  off_t length, struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);
	int			err;

	(void) ino;
	if ((err = check_fault(req, FAULT_OP_FALLOCATE, file, offset, (size_t) length,
						   NULL)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	fuse_reply_err(req, fallocate(file->fd, mode, offset, length) == 0 ? 0 : errno);
}

static void
faultfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
			  struct fuse_file_info *fi)
{
	off_t		res;

	(void) ino;
	res = lseek(get_file(fi)->fd, off, whence);
	if (res < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, res);
}

static void
faultfs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
						struct fuse_file_info *fi_in, fuse_ino_t ino_out,
						off_t off_out, struct fuse_file_info *fi_out,
						size_t len, int flags)
{
	FaultFile  *out = get_file(fi_out);
	loff_t		in_pos = off_in;
	loff_t		out_pos = off_out;
	ssize_t		n;
	int			err;

	(void) ino_in;
	(void) ino_out;
	if ((err = check_fault(req, FAULT_OP_WRITE, out, off_out, len, NULL)) != 0)
	{
		fuse_reply_err(req, err);
		return;
	}
	n = copy_file_range(get_file(fi_in)->fd, &in_pos, out->fd, &out_pos, len,
						(unsigned int) flags);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_write(req, (size_t) n);
}

static void
faultfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs st;

	if (fstatvfs(get_inode(ino)->fd, &st) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &st);
}

static void
faultfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FaultFile  *file;
	int			fd;

	fd = openat(get_inode(ino)->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
	{
		fuse_reply_err(req, errno);
		return;
	}
	file = new_file(fd);
	if (file == NULL)
	{
		close(fd);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	file->dir = fdopendir(fd);
	if (file->dir == NULL)
	{
		int			save_errno = errno;

		close(fd);
		free(file);
		fuse_reply_err(req, save_errno);
		return;
	}
	fi->fh = (uint64_t) (uintptr_t) file;
	fuse_reply_open(req, fi);
}

static void
faultfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
				struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);
	char	   *buf;
	size_t		used = 0;

	(void) ino;
	buf = malloc(size > 0 ? size : 1);
	if (buf == NULL)
	{
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (off != file->offset)
	{
		seekdir(file->dir, off);
		file->entry = NULL;
		file->offset = off;
	}
	for (;;)
	{
		struct stat st;
		size_t		entsize;

		if (file->entry == NULL)
		{
			errno = 0;
			file->entry = readdir(file->dir);
			if (file->entry == NULL)
			{
				if (errno != 0 && used == 0)
				{
					int			save_errno = errno;

					free(buf);
					fuse_reply_err(req, save_errno);
					return;
				}
				break;
			}
		}
		memset(&st, 0, sizeof(st));
		st.st_ino = file->entry->d_ino;
		st.st_mode = DTTOIF(file->entry->d_type);
		entsize = fuse_add_direntry(req, buf + used, size - used,
									file->entry->d_name, &st,
									file->entry->d_off);
		if (entsize > size - used)
			break;				/* next call, from this entry */
		used += entsize;
		file->offset = file->entry->d_off;
		file->entry = NULL;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void
faultfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	FaultFile  *file = get_file(fi);

	(void) ino;
	closedir(file->dir);
	free(file);
	fuse_reply_err(req, 0);
}

static void
faultfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
				 struct fuse_file_info *fi)
{
	(void) ino;
	do_fsync(req, get_file(fi), datasync);
}

static const struct fuse_lowlevel_ops faultfs_ops = {
	.init = faultfs_init,
	.lookup = faultfs_lookup,
	.forget = faultfs_forget,
	.forget_multi = faultfs_forget_multi,
	.getattr = faultfs_getattr,
	.setattr = faultfs_setattr,
	.readlink = faultfs_readlink,
	.mknod = faultfs_mknod,
	.mkdir = faultfs_mkdir,
	.symlink = faultfs_symlink,
	.link = faultfs_link,
	.unlink = faultfs_unlink,
	.rmdir = faultfs_rmdir,
	.rename = faultfs_rename,
	.create = faultfs_create,
	.open = faultfs_open,
	.read = faultfs_read,
	.write = faultfs_write,
	.flush = faultfs_flush,
	.release = faultfs_release,
	.fsync = faultfs_fsync,
	.fallocate = faultfs_fallocate,
	.lseek = faultfs_lseek,
	.copy_file_range = faultfs_copy_file_range,
	.statfs = faultfs_statfs,
	.opendir = faultfs_opendir,
	.readdir = faultfs_readdir,
	.releasedir = faultfs_releasedir,
	.fsyncdir = faultfs_fsyncdir,
};

#define FAULTFS_OPT(t, p) { t, offsetof(typeof(options), p), 1 }

static const struct fuse_opt faultfs_opts[] = {
	FAULTFS_OPT("--backing=%s", backing),
	FAULTFS_OPT("--control=%s", control),
	FAULTFS_OPT("--log=%s", log),
	FUSE_OPT_END
};

int
main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts opts;
	struct fuse_session *se;
	struct fuse_loop_config *loop;
	struct stat st;
	struct rlimit rlim;
	int			rc = 1;

	if (fuse_opt_parse(&args, &options, faultfs_opts, NULL) != 0 ||
		fuse_parse_cmdline(&args, &opts) != 0)
		return 2;
	if (opts.show_help || opts.mountpoint == NULL || options.backing == NULL ||
		options.control == NULL || options.log == NULL)
	{
		fprintf(stderr,
				"usage: %s --backing=DIR --control=FILE --log=FILE [FUSE options] MOUNTPOINT\n",
				argv[0]);
		fuse_cmdline_help();
		return 2;
	}
	if (options.control[0] != '/')
	{
		fprintf(stderr, "faultfs: --control must be an absolute path\n");
		return 2;
	}

	backing_path = realpath(options.backing, NULL);
	if (backing_path == NULL)
	{
		fprintf(stderr, "faultfs: could not resolve \"%s\": %s\n",
				options.backing, strerror(errno));
		return 1;
	}
	backing_len = strlen(backing_path);
	root_inode.fd = open(backing_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_inode.fd < 0 || fstat(root_inode.fd, &st) != 0)
	{
		fprintf(stderr, "faultfs: could not open backing directory \"%s\": %s\n",
				backing_path, strerror(errno));
		return 1;
	}
	root_inode.dev = st.st_dev;
	root_inode.ino = st.st_ino;
	root_inode.nlookup = 2;

	log_fd = open(options.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log_fd < 0)
	{
		fprintf(stderr, "faultfs: could not open hit log \"%s\": %s\n",
				options.log, strerror(errno));
		return 1;
	}

	/*
	 * Every inode the kernel caches holds a descriptor here (a data
	 * directory has a few thousand files): raise the soft limit to the hard
	 * one.
	 */
	if (getrlimit(RLIMIT_NOFILE, &rlim) == 0 && rlim.rlim_cur < rlim.rlim_max)
	{
		rlim.rlim_cur = rlim.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rlim) != 0)
			fprintf(stderr, "faultfs: could not raise the descriptor limit: %s\n",
					strerror(errno));
	}

	/* the kernel applied the caller's umask already */
	umask(0);

	se = fuse_session_new(&args, &faultfs_ops, sizeof(faultfs_ops), NULL);
	if (se == NULL)
		goto out;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_destroy;
	if (fuse_session_mount(se, opts.mountpoint) != 0)
		goto out_signals;
	fuse_daemonize(opts.foreground);

	if (opts.singlethread)
		rc = fuse_session_loop(se);
	else
	{
		loop = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(loop, opts.clone_fd);
		fuse_loop_cfg_set_idle_threads(loop, 10);
		rc = fuse_session_loop_mt(se, loop);
		fuse_loop_cfg_destroy(loop);
	}
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
out:
	free(opts.mountpoint);
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}
