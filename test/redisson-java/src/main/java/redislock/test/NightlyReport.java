/*
 * NightlyReport.java - the Java side of docs/database-jobs.md's "one run at a
 * time across a fleet" example: a scheduled task that skips its run while a
 * database job (or another instance of the service) holds the lock.
 * test/t/405_pg_cron.pl runs nightlyReport() through the driver (op
 * task.nightlyReport) against pg_cron jobs on the same lock, and the docs
 * page copies nightlyReport() from here.
 */
package redislock.test;

import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

final class NightlyReport
{
	private final RedissonClient redisson;
	private int reports;

	NightlyReport(RedissonClient redisson)
	{
		this.redisson = redisson;
	}

	/* One scheduled run: "ran" if it made the report, else "skipped". */
	String run()
	{
		int before = reports;
		nightlyReport();
		return reports > before ? "ran" : "skipped";
	}

	// In a Spring service: @Scheduled(cron = "0 36 8 * * *", zone = "UTC")
	public void nightlyReport()
	{
		RLock lock = redisson.getLock("jobs:nightly-report");
		if (!lock.tryLock())
		{
			return;    // a database job (or another instance) runs it
		}
		try
		{
			makeReport();
		}
		finally
		{
			lock.unlock();
		}
	}

	private void makeReport()
	{
		reports++;
	}
}
