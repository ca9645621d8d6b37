/*
 * Driver.java - a real Redisson client that redislock's TAP tests drive over
 * a line protocol on stdin/stdout (README.md in this directory describes it).
 *
 * It is compiled against every Redisson version the tests cover, from 3.12
 * on: it uses only the API all of them share, and reflection for what only
 * some have (RFencedLock since 3.19, shardedSubscriptionMode since 3.29,
 * the newer RPermitExpirableSemaphore methods, the non-reentrant locks since
 * 4.4).
 * Lock operations run in named Java threads, because Redisson's owner id is
 * "<client id>:<thread id>": one JVM can then hold a lock as several owners,
 * and a blocking call can wait in its thread while the test goes on.
 */
package redislock.test;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.RedissonMultiLock;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.SingleServerConfig;

public final class Driver
{
	private static final TimeUnit MS = TimeUnit.MILLISECONDS;

	private final PrintWriter out;
	private final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();
	private final Map<String, Future<?>> pending = new ConcurrentHashMap<>();
	private RedissonClient client;

	private Driver(PrintWriter out)
	{
		this.out = out;
	}

	public static void main(String[] args) throws Exception
	{
		/* The protocol owns stdout: anything else that prints goes to stderr. */
		PrintWriter out = new PrintWriter(new OutputStreamWriter(
				new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8), true);
		System.setOut(System.err);
		Driver d = new Driver(out);
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
		String line;
		while ((line = in.readLine()) != null)
		{
			line = line.trim();
			if (line.isEmpty() || line.startsWith("#"))
				continue;
			if (!d.command(line))
				break;
		}
		d.shutdown();
	}

	/* One command line; false ends the program. */
	private boolean command(String line)
	{
		List<String> w = new ArrayList<>();
		for (String t : line.split(" +"))
			w.add(decode(t));
		String verb = w.get(0);
		try
		{
			switch (verb)
			{
				case "quit":
					reply("ok");
					return false;
				case "version":
					reply("ok " + enc(redissonVersion()));
					return true;
				case "connect":
					connect(w.subList(1, w.size()));
					reply("ok " + enc(client.getId()));
					return true;
				case "id":
					reply("ok " + enc(client.getId()));
					return true;
				case "run":
					{
						need(w, 3);
						Future<Object> f = thread(w.get(1)).submit(() -> op(w.subList(2, w.size())));
						reply(result(f));
						return true;
					}
				case "start":
					{
						need(w, 4);
						String tag = w.get(1);
						List<String> opw = w.subList(3, w.size());
						synchronized (pending)
						{
							if (pending.containsKey(tag))
								throw new IllegalArgumentException("tag " + tag + " is still running");
							pending.put(tag, thread(w.get(2)).submit(() -> finish(tag, opw)));
						}
						reply("ok");
						return true;
					}
				case "cancel":
					{
						need(w, 2);
						Future<?> f = pending.get(w.get(1));
						reply("ok " + (f != null && f.cancel(true)));
						return true;
					}
				default:
					throw new IllegalArgumentException("unknown command " + verb);
			}
		}
		catch (Throwable e)
		{
			reply(error(e));
			return true;
		}
	}

	/* A started operation: its result line, once its tag is free again. */
	private void finish(String tag, List<String> opw)
	{
		String r;
		try
		{
			r = "ok " + value(op(opw));
		}
		catch (Throwable e)
		{
			r = error(e);
		}
		synchronized (pending)
		{
			pending.remove(tag);
		}
		reply("result " + enc(tag) + " " + r);
	}

	private synchronized void reply(String s)
	{
		out.println(s);
	}

	private ExecutorService thread(String name)
	{
		return threads.computeIfAbsent(name, n -> Executors.newSingleThreadExecutor(r -> {
			Thread t = new Thread(r, "driver-" + n);
			t.setDaemon(true);
			return t;
		}));
	}

	private static String result(Future<Object> f)
	{
		try
		{
			return "ok " + value(f.get());
		}
		catch (Throwable e)
		{
			return error(e);
		}
	}

	private static String value(Object v)
	{
		if (v == null)
			return "null";
		return enc(String.valueOf(v));
	}

	private static String error(Throwable e)
	{
		while ((e instanceof ExecutionException || e instanceof InvocationTargetException) && e.getCause() != null)
			e = e.getCause();
		return "err " + e.getClass().getName() + " " + enc(String.valueOf(e.getMessage()));
	}

	private static void need(List<String> w, int n)
	{
		if (w.size() < n)
			throw new IllegalArgumentException(w.get(0) + " needs " + (n - 1) + " arguments");
	}

	private static String redissonVersion()
	{
		Package p = Redisson.class.getPackage();
		return p.getImplementationVersion() != null ? p.getImplementationVersion() : "unknown";
	}

	/* connect single URL [opt=value...] | sentinel MASTER URL[,URL...] [...] | cluster URL[,URL...] [...] */
	private void connect(List<String> a) throws Exception
	{
		if (client != null)
			throw new IllegalStateException("already connected");
		Config config = new Config();
		Object server;
		int optsFrom;
		switch (a.isEmpty() ? "" : a.get(0))
		{
			case "single":
				{
					SingleServerConfig c = config.useSingleServer();
					c.setAddress(a.get(1));
					server = c;
					optsFrom = 2;
					break;
				}
			case "sentinel":
				{
					SentinelServersConfig c = config.useSentinelServers();
					c.setMasterName(a.get(1));
					c.addSentinelAddress(a.get(2).split(","));
					server = c;
					optsFrom = 3;
					break;
				}
			case "cluster":
				{
					ClusterServersConfig c = config.useClusterServers();
					c.addNodeAddress(a.get(1).split(","));
					server = c;
					optsFrom = 2;
					break;
				}
			default:
				throw new IllegalArgumentException("connect single|sentinel|cluster ...");
		}
		for (String opt : a.subList(optsFrom, a.size()))
		{
			int eq = opt.indexOf('=');
			if (eq < 0)
				throw new IllegalArgumentException("option " + opt + " is not key=value");
			String k = opt.substring(0, eq), v = opt.substring(eq + 1);
			switch (k)
			{
				case "watchdog":
					config.setLockWatchdogTimeout(Long.parseLong(v));
					break;
				case "fairWait":
					/* fairLockWaitTimeout (3.46+): the fair lock's thread wait time */
					invoke(config, "setFairLockWaitTimeout", long.class, Long.parseLong(v));
					break;
				case "password":
					invoke(server, "setPassword", String.class, v);
					break;
				case "timeout":
					invoke(server, "setTimeout", int.class, Integer.parseInt(v));
					break;
				case "minIdle":
					{
						/* idle connections opened at start, per node */
						int n = Integer.parseInt(v);
						if (server instanceof SingleServerConfig)
							((SingleServerConfig) server).setConnectionMinimumIdleSize(n);
						else
						{
							invoke(server, "setMasterConnectionMinimumIdleSize", int.class, n);
							invoke(server, "setSlaveConnectionMinimumIdleSize", int.class, n);
						}
						break;
					}
				case "connectTimeout":
					invoke(server, "setConnectTimeout", int.class, Integer.parseInt(v));
					break;
				case "checkSentinelsList":
					invoke(server, "setCheckSentinelsList", boolean.class, Boolean.parseBoolean(v));
					break;
				case "truststore":
				case "truststorePassword":
					{
						/*
						 * rediss:// servers are trusted when a CA in this
						 * trust store file (PKCS12 or JKS) signed their
						 * certificate.  The SSL settings are on each
						 * server's config up to 3.x and on Config in 4.x.
						 */
						Object ssl;
						try
						{
							Config.class.getMethod("setSslTruststore", java.net.URL.class);
							ssl = config;
						}
						catch (NoSuchMethodException e)
						{
							ssl = server;
						}
						if (k.equals("truststore"))
							invoke(ssl, "setSslTruststore", java.net.URL.class, new java.io.File(v).toURI().toURL());
						else
							invoke(ssl, "setSslTruststorePassword", String.class, v);
						break;
					}
				case "sharded":
					{
						/* ShardedSubscriptionMode (3.29+): AUTO, ON, OFF */
						Class<?> mode = Class.forName("org.redisson.config.ShardedSubscriptionMode");
						@SuppressWarnings({"unchecked", "rawtypes"})
						Object m = Enum.valueOf((Class<? extends Enum>) mode, v.toUpperCase());
						invoke(server, "setShardedSubscriptionMode", mode, m);
						break;
					}
				default:
					throw new IllegalArgumentException("unknown option " + k);
			}
		}
		client = Redisson.create(config);
	}

	private static Object invoke(Object target, String method, Class<?> type, Object arg) throws Exception
	{
		Method m = findMethod(target.getClass(), method, type);
		return m.invoke(target, arg);
	}

	private static Method findMethod(Class<?> c, String name, Class<?>... types)
	{
		try
		{
			return c.getMethod(name, types);
		}
		catch (NoSuchMethodException e)
		{
			StringBuilder sig = new StringBuilder(name).append('(');
			for (int i = 0; i < types.length; i++)
				sig.append(i > 0 ? ", " : "").append(types[i].getSimpleName());
			throw new UnsupportedOperationException(sig + ") does not exist in Redisson " + redissonVersion());
		}
	}

	private void shutdown()
	{
		/* Redisson's shutdown waits for its event loops; do not let it hang the test. */
		Thread guard = new Thread(() -> {
			try
			{
				Thread.sleep(10000);
			}
			catch (InterruptedException e)
			{
				return;
			}
			Runtime.getRuntime().halt(3);
		});
		guard.setDaemon(true);
		guard.start();
		if (client != null)
			client.shutdown();
		System.exit(0);
	}

	/* ---- operations, run in the named thread ---------------------------------- */

	private RLock lock(String kind, String name) throws Exception
	{
		switch (kind)
		{
			case "plain":
				return client.getLock(name);
			case "fair":
				return client.getFairLock(name);
			case "read":
				return client.getReadWriteLock(name).readLock();
			case "write":
				return client.getReadWriteLock(name).writeLock();
			case "fenced":
				return (RLock) fenced(name);
			case "nonreentrant":
				/* getNonReentrantLock, getNonReentrantFairLock: 4.4+ */
				return (RLock) findMethod(client.getClass(), "getNonReentrantLock", String.class).invoke(client, name);
			case "nonreentrantfair":
				return (RLock) findMethod(client.getClass(), "getNonReentrantFairLock", String.class).invoke(client, name);
			default:
				throw new IllegalArgumentException("lock kind " + kind
												   + ": plain|fair|read|write|fenced|nonreentrant|nonreentrantfair");
		}
	}

	private Object fenced(String name) throws Exception
	{
		return findMethod(client.getClass(), "getFencedLock", String.class).invoke(client, name);
	}

	private static long num(String s)
	{
		return Long.parseLong(s);
	}

	private Object op(List<String> w) throws Exception
	{
		String o = w.get(0);
		List<String> a = w.subList(1, w.size());
		switch (o)
		{
			case "owner":
				return client.getId() + ":" + Thread.currentThread().getId();
			case "threadid":
				return Thread.currentThread().getId();

			/* locks: <op> <kind> <name> ... */
			case "lock":
				{
					RLock l = lock(a.get(0), a.get(1));
					long lease = a.size() > 2 ? num(a.get(2)) : -1;
					if (lease < 0)
						l.lock();
					else
						l.lock(lease, MS);
					return null;
				}
			case "lockInterruptibly":
				{
					RLock l = lock(a.get(0), a.get(1));
					long lease = a.size() > 2 ? num(a.get(2)) : -1;
					if (lease < 0)
						l.lockInterruptibly();
					else
						l.lockInterruptibly(lease, MS);
					return null;
				}
			case "tryLock":
				{
					RLock l = lock(a.get(0), a.get(1));
					if (a.size() == 2)
						return l.tryLock();
					return l.tryLock(num(a.get(2)), a.size() > 3 ? num(a.get(3)) : -1, MS);
				}
			case "tryLockIn":
				{
					/*
					 * tryLock(wait, unit) / tryLock(wait, lease, unit) in a
					 * unit of the caller's (SECONDS, ...): the fair lock's
					 * queue slot is taken from that wait
					 */
					RLock l = lock(a.get(0), a.get(1));
					TimeUnit unit = TimeUnit.valueOf(a.get(3));
					if (a.size() == 4)
						return l.tryLock(num(a.get(2)), unit);
					return l.tryLock(num(a.get(2)), num(a.get(4)), unit);
				}
			case "unlock":
				lock(a.get(0), a.get(1)).unlock();
				return null;
			case "forceUnlock":
				return lock(a.get(0), a.get(1)).forceUnlock();
			case "isLocked":
				return lock(a.get(0), a.get(1)).isLocked();
			case "isHeldByCurrentThread":
				return lock(a.get(0), a.get(1)).isHeldByCurrentThread();
			case "getHoldCount":
				return lock(a.get(0), a.get(1)).getHoldCount();

			/* fenced lock (RFencedLock, 3.19+): tokens */
			case "lockAndGetToken":
				{
					Object f = fenced(a.get(0));
					long lease = a.size() > 1 ? num(a.get(1)) : -1;
					if (lease < 0)
						return findMethod(f.getClass(), "lockAndGetToken").invoke(f);
					return findMethod(f.getClass(), "lockAndGetToken", long.class, TimeUnit.class).invoke(f, lease, MS);
				}
			case "tryLockAndGetToken":
				{
					Object f = fenced(a.get(0));
					return findMethod(f.getClass(), "tryLockAndGetToken", long.class, long.class, TimeUnit.class)
						.invoke(f, num(a.get(1)), a.size() > 2 ? num(a.get(2)) : -1, MS);
				}
			case "getToken":
				{
					Object f = fenced(a.get(0));
					return findMethod(f.getClass(), "getToken").invoke(f);
				}

			/* multi-lock of plain locks: mlock lease name...; mtryLock wait lease name...; munlock name... */
			case "mlock":
				{
					RLock m = multi(a.subList(1, a.size()));
					long lease = num(a.get(0));
					if (lease < 0)
						m.lock();
					else
						m.lock(lease, MS);
					return null;
				}
			case "mtryLock":
				return multi(a.subList(2, a.size())).tryLock(num(a.get(0)), num(a.get(1)), MS);
			case "munlock":
				multi(a).unlock();
				return null;

			/* RSemaphore */
			case "sem.trySetPermits":
				return client.getSemaphore(a.get(0)).trySetPermits((int) num(a.get(1)));
			case "sem.acquire":
				client.getSemaphore(a.get(0)).acquire(a.size() > 1 ? (int) num(a.get(1)) : 1);
				return null;
			case "sem.tryAcquire":
				{
					RSemaphore s = client.getSemaphore(a.get(0));
					int n = a.size() > 1 ? (int) num(a.get(1)) : 1;
					if (a.size() > 2)
						return s.tryAcquire(n, num(a.get(2)), MS);
					return s.tryAcquire(n);
				}
			case "sem.release":
				client.getSemaphore(a.get(0)).release(a.size() > 1 ? (int) num(a.get(1)) : 1);
				return null;
			case "sem.addPermits":
				client.getSemaphore(a.get(0)).addPermits((int) num(a.get(1)));
				return null;
			case "sem.availablePermits":
				return client.getSemaphore(a.get(0)).availablePermits();

			/* RPermitExpirableSemaphore: leases in ms, -1 = none; permit ids as Redisson returns them */
			case "pes.trySetPermits":
				return client.getPermitExpirableSemaphore(a.get(0)).trySetPermits((int) num(a.get(1)));
			case "pes.addPermits":
				client.getPermitExpirableSemaphore(a.get(0)).addPermits((int) num(a.get(1)));
				return null;
			case "pes.acquire":
				{
					RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a.get(0));
					long lease = a.size() > 1 ? num(a.get(1)) : -1;
					return lease < 0 ? s.acquire() : s.acquire(lease, MS);
				}
			case "pes.tryAcquire":
				{
					RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a.get(0));
					return s.tryAcquire(num(a.get(1)), a.size() > 2 ? num(a.get(2)) : -1, MS);
				}
			case "pes.release":
				client.getPermitExpirableSemaphore(a.get(0)).release(a.get(1));
				return null;
			case "pes.tryRelease":
				return client.getPermitExpirableSemaphore(a.get(0)).tryRelease(a.get(1));
			case "pes.availablePermits":
				return client.getPermitExpirableSemaphore(a.get(0)).availablePermits();
			case "pes.updateLeaseTime":
				return client.getPermitExpirableSemaphore(a.get(0)).updateLeaseTime(a.get(1), num(a.get(2)), MS);
			case "pes.getLeaseTime":
				/* of the versions tested: 3.43.0 on */
				return pes(a.get(0), "getLeaseTime", String.class, a.get(1));
			case "pes.getPermits":
				/* of the versions tested: 3.21.3 on */
				return pes(a.get(0), "getPermits");
			case "pes.releaseList":
				/* release(List), tryRelease(List); of the versions tested: 3.31.0 on */
				return pes(a.get(0), "release", List.class, new ArrayList<>(a.subList(1, a.size())));
			case "pes.tryReleaseList":
				return pes(a.get(0), "tryRelease", List.class, new ArrayList<>(a.subList(1, a.size())));

			/* RCountDownLatch */
			case "latch.trySetCount":
				return client.getCountDownLatch(a.get(0)).trySetCount(num(a.get(1)));
			case "latch.countDown":
				client.getCountDownLatch(a.get(0)).countDown();
				return null;
			case "latch.await":
				{
					RCountDownLatch l = client.getCountDownLatch(a.get(0));
					if (a.size() > 1)
						return l.await(num(a.get(1)), MS);
					l.await();
					return null;
				}
			case "latch.getCount":
				return client.getCountDownLatch(a.get(0)).getCount();

			/* a service's code, as the docs show it */
			case "task.nightlyReport":
				return new NightlyReport(client).run();

			default:
				throw new IllegalArgumentException("unknown operation " + o);
		}
	}

	/* An RPermitExpirableSemaphore method only newer versions have. */
	private Object pes(String name, String method) throws Exception
	{
		RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(name);
		return findMethod(s.getClass(), method).invoke(s);
	}

	private Object pes(String name, String method, Class<?> type, Object arg) throws Exception
	{
		RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(name);
		return invoke(s, method, type, arg);
	}

	private RLock multi(List<String> names)
	{
		RLock[] locks = new RLock[names.size()];
		for (int i = 0; i < locks.length; i++)
			locks[i] = client.getLock(names.get(i));
		return new RedissonMultiLock(locks);
	}

	/* ---- %XX escapes (arguments and reply values) ------------------------------ */

	static String decode(String s)
	{
		if (s.equals("%"))
			return "";
		if (s.indexOf('%') < 0)
			return s;
		ByteArrayOutputStream b = new ByteArrayOutputStream();
		byte[] in = s.getBytes(StandardCharsets.UTF_8);
		for (int i = 0; i < in.length; i++)
		{
			if (in[i] == '%' && i + 2 < in.length)
			{
				b.write(Integer.parseInt(new String(in, i + 1, 2, StandardCharsets.US_ASCII), 16));
				i += 2;
			}
			else
				b.write(in[i]);
		}
		return new String(b.toByteArray(), StandardCharsets.UTF_8);
	}

	static String enc(String s)
	{
		StringBuilder r = new StringBuilder();
		for (byte c : s.getBytes(StandardCharsets.UTF_8))
		{
			if (c > 32 && c < 127 && c != '%')
				r.append((char) c);
			else
				r.append(String.format("%%%02X", c & 0xff));
		}
		return r.length() == 0 ? "%" : r.toString();
	}
}
