/*
 * DemoService.java - the Java service of the sandbox (test/sandbox.sh): a
 * worker that, round after round, takes one Redisson lock, works under it
 * and unlocks it, the way a Java service sharing a lock with database jobs
 * does.  It logs every step with the wall-clock time, so that the sandbox can
 * merge its log with what the SQL sessions and the pg_cron job record and
 * show who held the lock when.  It stops after the round in progress when
 * its standard input ends.
 *
 * Usage: DemoService <redis url> <lock name> <hold ms> <pause ms>
 * Log lines (stdout): "<epoch ms> <event> <detail>", events started (detail:
 * the owner id Redis shows for this thread), waiting, took, releasing (said
 * before unlock(), while the lock is still held, so that a logged hold never
 * outlasts the real one), stopped.
 */
package redislock.test;

import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

public final class DemoService
{
	private DemoService()
	{
	}

	private static void log(String event, String detail)
	{
		System.out.println(System.currentTimeMillis() + " " + event + " " + detail);
		System.out.flush();
	}

	public static void main(String[] args) throws Exception
	{
		if (args.length != 4)
		{
			System.err.println("usage: DemoService <redis url> <lock name> <hold ms> <pause ms>");
			System.exit(2);
		}
		String name = args[1];
		long holdMs = Long.parseLong(args[2]);
		long pauseMs = Long.parseLong(args[3]);

		Config config = new Config();
		config.useSingleServer().setAddress(args[0]).setConnectionMinimumIdleSize(2);
		RedissonClient redisson = Redisson.create(config);

		AtomicBoolean stop = new AtomicBoolean();
		Thread input = new Thread(() -> {
			try
			{
				while (System.in.read() >= 0)
					;
			}
			catch (IOException e)
			{
				/* an unreadable input ends the service as its end does */
			}
			stop.set(true);
		});
		input.setDaemon(true);
		input.start();

		RLock lock = redisson.getLock(name);
		log("started", redisson.getId() + ":" + Thread.currentThread().getId());
		while (!stop.get())
		{
			log("waiting", name);
			lock.lock();    /* no lease: Redisson's watchdog renews it */
			try
			{
				log("took", name);
				Thread.sleep(holdMs);    /* the work done under the lock */
			}
			finally
			{
				log("releasing", name);
				lock.unlock();
			}
			TimeUnit.MILLISECONDS.sleep(pauseMs);
		}
		log("stopped", name);
		redisson.shutdown();
	}
}
