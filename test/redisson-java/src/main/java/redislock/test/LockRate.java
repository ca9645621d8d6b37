/*
 * LockRate.java - the Java side of bench/javarate.pl: how many uncontended
 * lock() + unlock() pairs per second a Java service gets from Redisson, on
 * one Redis, with N threads of one client, each on a lock name of its own
 * (as pgbench's clients are on the SQL side).
 *
 * Usage: LockRate <redis url> <threads> <seconds> <name prefix>
 * Prints one line: "threads=N pairs=P seconds=S rate=R" (pairs per second,
 * all threads together), after a warm-up of 2 s that is not counted.
 */
package redislock.test;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class LockRate
{
	private LockRate()
	{
	}

	public static void main(String[] args) throws Exception
	{
		if (args.length != 4)
		{
			System.err.println("usage: LockRate <redis url> <threads> <seconds> <name prefix>");
			System.exit(2);
		}
		int threads = Integer.parseInt(args[1]);
		long seconds = Long.parseLong(args[2]);
		String prefix = args[3];

		Config config = new Config();
		config.useSingleServer().setAddress(args[0])
			.setConnectionMinimumIdleSize(threads).setConnectionPoolSize(Math.max(threads, 4));
		RedissonClient redisson = Redisson.create(config);

		AtomicBoolean counting = new AtomicBoolean();
		AtomicBoolean stop = new AtomicBoolean();
		AtomicLong pairs = new AtomicLong();
		CountDownLatch done = new CountDownLatch(threads);
		Thread[] t = new Thread[threads];
		for (int i = 0; i < threads; i++)
		{
			RLock lock = redisson.getLock(prefix + i);
			t[i] = new Thread(() -> {
				while (!stop.get())
				{
					lock.lock();
					lock.unlock();
					if (counting.get())
						pairs.incrementAndGet();
				}
				done.countDown();
			});
			t[i].start();
		}
		Thread.sleep(2000);
		counting.set(true);
		long start = System.nanoTime();
		long startPairs = pairs.get();
		Thread.sleep(seconds * 1000);
		long n = pairs.get() - startPairs;
		double secs = (System.nanoTime() - start) / 1e9;
		stop.set(true);
		done.await();
		System.out.printf("threads=%d pairs=%d seconds=%.3f rate=%.1f%n", threads, n, secs, n / secs);
		redisson.shutdown();
	}
}
