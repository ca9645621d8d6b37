/*
 * Driver.java - ShedLock's Redis lock provider and Spring Integration's
 * RedisLockRegistry, each driven by redislock's TAP tests over the peer line
 * protocol (PLAIN.md; test/peers/java/README.md says what each op does here).
 *
 *   java -cp $(cat $CACHE/java/classpath) redislock.peers.Driver shedlock url=redis://127.0.0.1:PORT
 *       [env=E] [prefix=P] [safe=true] [log=LEVEL]
 *   java -cp $(cat $CACHE/java/classpath) redislock.peers.Driver spring url=redis://127.0.0.1:PORT
 *       [registry=R] [expire=MS] [type=spin|pubsub] [idle=MS] [log=LEVEL]
 *
 * It prints "ready <client> <library version>" once connected, then answers
 * each "<tag> <op> <args...>" line with one "<tag> ok <value>" or
 * "<tag> err <message>" line, in completion order: every op runs in a thread
 * of its own, so a blocking lock can wait while the test sends other ops.
 * Spring's locks belong to the thread that took them (a ReentrantLock inside
 * each), so lock, unlock and extend of one name always run in that name's own
 * thread; a counter op takes and releases in one thread of its own.
 */
package redislock.peers;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadFactory;

import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.redis.spring.RedisLockProvider;
import net.javacrumbs.shedlock.provider.redis.support.InternalRedisLockProvider;

import io.lettuce.core.RedisClient;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.integration.redis.util.RedisLockRegistry;
import org.springframework.integration.support.locks.DistributedLock;

public final class Driver
{
	/* What the protocol needs from a lock library. */
	private interface Peer
	{
		String version();

		/* "<library>=<version>" */
		String library();

		String key(String name);

		/* A held lock, or null when not acquired within waitMs. */
		Object acquire(String name, long leaseMs, long waitMs, long leastMs) throws Exception;

		void release(String name, Object held) throws Exception;

		/* The (possibly new) held lock, or null when not extended. */
		Object extend(String name, Object held, long leaseMs) throws Exception;

		/* Whether a lock that failed to extend is still to be unlocked. */
		boolean heldAfterFailedExtend();

		/* Where lock, unlock and extend of this name run. */
		ExecutorService thread(String name);

		void close();
	}

	private final PrintWriter out;
	private final Peer peer;
	private final StringRedisTemplate redis;
	/* per name, the locks this driver holds, newest first (Spring's reenter) */
	private final Map<String, Deque<Object>> held = new ConcurrentHashMap<>();
	private final ExecutorService pool = Executors.newCachedThreadPool(daemon("op"));

	private Driver(PrintWriter out, Peer peer, StringRedisTemplate redis)
	{
		this.out = out;
		this.peer = peer;
		this.redis = redis;
	}

	public static void main(String[] args) throws Exception
	{
		/* The protocol owns stdout: anything else that prints goes to stderr. */
		PrintWriter out = new PrintWriter(new OutputStreamWriter(
				new FileOutputStream(FileDescriptor.out), StandardCharsets.UTF_8), true);
		System.setOut(System.err);
		if (args.length < 1)
			usage("no client named");
		String client = args[0];
		Map<String, String> opt = new ConcurrentHashMap<>();
		List<String> urls = new ArrayList<>();
		for (int i = 1; i < args.length; i++)
		{
			int eq = args[i].indexOf('=');
			if (eq <= 0)
				usage("option " + args[i] + " is not name=value");
			String k = args[i].substring(0, eq), v = args[i].substring(eq + 1);
			if (k.equals("url"))
				urls.add(v);
			else
				opt.put(k, v);
		}
		if (urls.size() != 1)
			usage("give exactly one url= (neither library does Redlock)");
		/* log=LEVEL: slf4j-simple's level (stderr), set before anything logs */
		String level = opt.remove("log");
		System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", level != null ? level
				: System.getProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn"));

		LettuceConnectionFactory factory = connect(urls.get(0));
		StringRedisTemplate redis = new StringRedisTemplate(factory);
		Peer peer = switch (client)
		{
			case "shedlock" -> new ShedLock(factory, opt);
			case "spring" -> new Spring(factory, opt);
			default -> throw usage("unknown client " + client + " (shedlock or spring)");
		};
		if (!opt.isEmpty())
			usage("unknown option(s) for " + client + ": " + opt.keySet());
		/* connected means answering: one PING before "ready" */
		redis.execute((RedisCallback<String>) c -> c.ping());

		Driver d = new Driver(out, peer, redis);
		d.say("ready " + client + " " + peer.version());
		BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
		String line;
		while ((line = in.readLine()) != null)
		{
			line = line.trim();
			if (line.isEmpty())
				continue;
			if (!d.command(line.split(" +")))
				break;
		}
		peer.close();
		factory.destroy();
		System.exit(0);
	}

	private static IllegalArgumentException usage(String why)
	{
		System.err.println("redislock.peers.Driver: " + why);
		System.err.println("usage: Driver shedlock url=redis://H:P [env=E] [prefix=P] [safe=true|false] [log=LEVEL]");
		System.err.println("       Driver spring url=redis://H:P [registry=R] [expire=MS] [type=spin|pubsub] [idle=MS] [log=LEVEL]");
		System.exit(2);
		return new IllegalArgumentException(why);
	}

	/* redis://[user:password@]host:port[/db] */
	private static LettuceConnectionFactory connect(String url)
	{
		URI u = URI.create(url);
		if (!"redis".equals(u.getScheme()) || u.getHost() == null)
			usage("url " + url + " is not redis://host:port");
		RedisStandaloneConfiguration conf = new RedisStandaloneConfiguration(u.getHost(),
				u.getPort() > 0 ? u.getPort() : 6379);
		if (u.getUserInfo() != null)
		{
			String[] up = u.getUserInfo().split(":", 2);
			if (up.length == 2)
			{
				if (!up[0].isEmpty())
					conf.setUsername(up[0]);
				conf.setPassword(up[1]);
			}
			else
				conf.setPassword(up[0]);
		}
		if (u.getPath() != null && u.getPath().length() > 1)
			conf.setDatabase(Integer.parseInt(u.getPath().substring(1)));
		LettuceConnectionFactory f = new LettuceConnectionFactory(conf,
				LettuceClientConfiguration.builder().commandTimeout(Duration.ofSeconds(10)).build());
		f.afterPropertiesSet();
		f.start();
		return f;
	}

	private static ThreadFactory daemon(String prefix)
	{
		return r -> {
			Thread t = new Thread(r, prefix);
			t.setDaemon(true);
			return t;
		};
	}

	private synchronized void say(String line)
	{
		out.println(line);
	}

	private void reply(String tag, Object value)
	{
		say(tag + " ok " + value);
	}

	private void fail(String tag, Throwable e)
	{
		while ((e instanceof ExecutionException
				|| e instanceof CompletionException) && e.getCause() != null)
			e = e.getCause();
		String m = e.getClass().getName() + (e.getMessage() == null ? "" : ": " + e.getMessage());
		say(tag + " err " + m.replaceAll("\\s+", " ").trim());
	}

	/* One request line; false ends the program. */
	private boolean command(String[] w)
	{
		String tag = w[0];
		try
		{
			if (w.length < 2)
				throw new IllegalArgumentException("no op");
			String op = w[1];
			switch (op)
			{
				case "quit":
					reply(tag, "bye");
					return false;
				case "key":
					need(w, 3, "key <name>");
					reply(tag, peer.key(w[2]));
					return true;
				case "versions":
					reply(tag, peer.library()
						  + " spring-data-redis=" + jarVersion(StringRedisTemplate.class, "org.springframework.data", "spring-data-redis")
						  + " lettuce=" + jarVersion(RedisClient.class, "io.lettuce", "lettuce-core")
						  + " java=" + System.getProperty("java.version"));
					return true;
				case "lock":
					{
						need(w, 5, "lock <name> <lease_ms> <wait_ms> [<least_ms>]");
						String name = w[2];
						long lease = num(w[3]), wait = num(w[4]), least = w.length > 5 ? num(w[5]) : 0;
						run(tag, peer.thread(name), () -> {
							Object h = peer.acquire(name, lease, wait, least);
							if (h == null)
								return false;
							held.computeIfAbsent(name, k -> new ConcurrentLinkedDeque<>()).push(h);
							return true;
						});
						return true;
					}
				case "unlock":
					{
						need(w, 3, "unlock <name>");
						String name = w[2];
						run(tag, peer.thread(name), () -> {
							Object h = held.getOrDefault(name, new ArrayDeque<>()).poll();
							if (h == null)
								throw new IllegalStateException("this driver holds no lock named " + name);
							peer.release(name, h);
							return true;
						});
						return true;
					}
				case "extend":
					{
						need(w, 4, "extend <name> <lease_ms>");
						String name = w[2];
						long lease = num(w[3]);
						run(tag, peer.thread(name), () -> {
							Deque<Object> mine = held.getOrDefault(name, new ArrayDeque<>());
							Object h = mine.poll();
							if (h == null)
								throw new IllegalStateException("this driver holds no lock named " + name);
							Object n = peer.extend(name, h, lease);
							if (n == null)
							{
								if (peer.heldAfterFailedExtend())
									mine.push(h);
								return false;
							}
							mine.push(n);
							return true;
						});
						return true;
					}
				case "counter":
					{
						need(w, 7, "counter <name> <counter_key> <n> <lease_ms> <wait_ms> [<hold_ms> [<gap_ms>]]");
						String name = w[2], ckey = w[3];
						long n = num(w[4]), lease = num(w[5]), wait = num(w[6]);
						long hold = w.length > 7 ? num(w[7]) : 0, gap = w.length > 8 ? num(w[8]) : 0;
						run(tag, pool, () -> counter(name, ckey, n, lease, wait, hold, gap));
						return true;
					}
				default:
					throw new IllegalArgumentException("unknown op " + op);
			}
		}
		catch (Throwable e)
		{
			fail(tag, e);
			return true;
		}
	}

	private interface Op
	{
		Object call() throws Exception;
	}

	private void run(String tag, ExecutorService where, Op op)
	{
		where.execute(() -> {
			try
			{
				reply(tag, op.call());
			}
			catch (Throwable e)
			{
				fail(tag, e);
			}
		});
	}

	/*
	 * n rounds of: lock (the library's own wait, again if it ends), read the
	 * counter, sleep hold ms, write it plus one, unlock, sleep gap ms.  All in
	 * this one thread.
	 */
	private long counter(String name, String ckey, long n, long lease, long wait, long hold, long gap)
		throws Exception
	{
		for (long i = 0; i < n; i++)
		{
			Object h;
			while ((h = peer.acquire(name, lease, wait, 0)) == null)
				;
			String v = redis.opsForValue().get(ckey);
			if (hold > 0)
				Thread.sleep(hold);
			redis.opsForValue().set(ckey, Long.toString(v == null ? 1 : Long.parseLong(v) + 1));
			peer.release(name, h);
			if (gap > 0)
				Thread.sleep(gap);
		}
		return n;
	}

	private static void need(String[] w, int n, String form)
	{
		if (w.length < n)
			throw new IllegalArgumentException("usage: <tag> " + form);
	}

	private static long num(String s)
	{
		long v = Long.parseLong(s);
		if (v < 0)
			throw new IllegalArgumentException("negative number " + s);
		return v;
	}

	/* A jar's version from its Maven pom.properties (the manifest as fallback). */
	private static String jarVersion(Class<?> c, String group, String artifact)
	{
		String res = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
		try (InputStream s = c.getResourceAsStream(res))
		{
			if (s != null)
			{
				Properties p = new Properties();
				p.load(s);
				if (p.getProperty("version") != null)
					return p.getProperty("version");
			}
		}
		catch (java.io.IOException e)
		{
			/* fall through to the manifest */
		}
		String v = c.getPackage().getImplementationVersion();
		return v != null ? v : "unknown";
	}

	private static boolean bool(Map<String, String> opt, String k, boolean dflt)
	{
		String v = opt.remove(k);
		if (v == null)
			return dflt;
		if (!v.equals("true") && !v.equals("false"))
			usage(k + "= must be true or false");
		return v.equals("true");
	}

	/*
	 * ShedLock: RedisLockProvider (safeUpdate through its Builder).  ShedLock
	 * never waits (a scheduler skips the run), so a wait is tries every
	 * 100 ms until wait_ms has passed.  Its locks are not bound to a thread.
	 */
	private static final class ShedLock implements Peer
	{
		private final RedisLockProvider provider;
		private final String env, prefix;
		private final ExecutorService any = Executors.newCachedThreadPool(daemon("shedlock"));

		ShedLock(LettuceConnectionFactory f, Map<String, String> opt)
		{
			String e = opt.remove("env"), p = opt.remove("prefix");
			env = e != null ? e : InternalRedisLockProvider.ENV_DEFAULT;
			prefix = p != null ? p : InternalRedisLockProvider.DEFAULT_KEY_PREFIX;
			provider = new RedisLockProvider.Builder(f).environment(env).keyPrefix(prefix)
				.safeUpdate(bool(opt, "safe", false)).build();
		}

		public String version()
		{
			return jarVersion(RedisLockProvider.class, "net.javacrumbs.shedlock", "shedlock-provider-redis-spring");
		}

		public String library()
		{
			return "shedlock-provider-redis-spring=" + version();
		}

		/* InternalRedisLockProvider.buildKey (private there) */
		public String key(String name)
		{
			return String.format("%s:%s:%s", prefix, env, name);
		}

		public Object acquire(String name, long leaseMs, long waitMs, long leastMs) throws Exception
		{
			long deadline = System.nanoTime() + waitMs * 1_000_000L;
			for (;;)
			{
				Optional<SimpleLock> l = provider.lock(new LockConfiguration(ClockProvider.now(), name,
						Duration.ofMillis(leaseMs), Duration.ofMillis(leastMs)));
				if (l.isPresent())
					return l.get();
				long left = (deadline - System.nanoTime()) / 1_000_000L;
				if (left <= 0)
					return null;
				Thread.sleep(Math.min(100, left));
			}
		}

		public void release(String name, Object held)
		{
			((SimpleLock) held).unlock();
		}

		public Object extend(String name, Object held, long leaseMs)
		{
			return ((SimpleLock) held).extend(Duration.ofMillis(leaseMs), Duration.ZERO).orElse(null);
		}

		/* extend() made the old SimpleLock invalid, whatever it returned */
		public boolean heldAfterFailedExtend()
		{
			return false;
		}

		public ExecutorService thread(String name)
		{
			return any;
		}

		public void close()
		{
			any.shutdownNow();
		}
	}

	/*
	 * Spring Integration: RedisLockRegistry.  lock is obtain(name).tryLock(wait,
	 * lease) (DistributedLock takes the lease per call; expire= is the
	 * registry's default expireAfter), unlock is unlock(), extend is
	 * renewLock(name, lease).
	 */
	private static final class Spring implements Peer
	{
		private final RedisLockRegistry registry;
		private final String registryKey;
		private final Map<String, ExecutorService> threads = new ConcurrentHashMap<>();

		Spring(LettuceConnectionFactory f, Map<String, String> opt)
		{
			String r = opt.remove("registry"), e = opt.remove("expire"), t = opt.remove("type"),
				idle = opt.remove("idle");
			registryKey = r != null ? r : "lock";
			registry = e != null ? new RedisLockRegistry(f, registryKey, Long.parseLong(e))
				: new RedisLockRegistry(f, registryKey);
			if (t == null || t.equals("spin"))
				registry.setRedisLockType(RedisLockRegistry.RedisLockType.SPIN_LOCK);
			else if (t.equals("pubsub"))
				registry.setRedisLockType(RedisLockRegistry.RedisLockType.PUB_SUB_LOCK);
			else
				usage("type= must be spin or pubsub");
			if (idle != null)
				registry.setIdleBetweenTries(Duration.ofMillis(Long.parseLong(idle)));
		}

		public String version()
		{
			return jarVersion(RedisLockRegistry.class, "org.springframework.integration", "spring-integration-redis");
		}

		public String library()
		{
			return "spring-integration-redis=" + version();
		}

		/* RedisLock.constructLockKey */
		public String key(String name)
		{
			return registryKey + ":" + name;
		}

		public Object acquire(String name, long leaseMs, long waitMs, long leastMs) throws Exception
		{
			if (leastMs != 0)
				throw new UnsupportedOperationException("Spring's locks have no lockAtLeastFor");
			DistributedLock l = registry.obtain(name);
			return l.tryLock(Duration.ofMillis(waitMs), Duration.ofMillis(leaseMs)) ? l : null;
		}

		public void release(String name, Object held)
		{
			((DistributedLock) held).unlock();
		}

		public Object extend(String name, Object held, long leaseMs)
		{
			try
			{
				registry.renewLock(name, Duration.ofMillis(leaseMs));
				return held;
			}
			catch (IllegalStateException e)
			{
				return null;
			}
		}

		/* the JVM-side ReentrantLock is still held: unlock() must release it */
		public boolean heldAfterFailedExtend()
		{
			return true;
		}

		public ExecutorService thread(String name)
		{
			return threads.computeIfAbsent(name, n -> Executors.newSingleThreadExecutor(daemon("lock-" + n)));
		}

		public void close()
		{
			registry.destroy();
		}
	}
}
