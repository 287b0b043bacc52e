// Retention of the record changes followers read (GET /api/v1/stream: docs/integrators.md):
// 30 days, like tombstones and the delivery log. Each company's oldest changes are removed first
// (along its stream index, so no table scan), and the furthest removed is kept per company
// (service.stream_pruned): a follower whose offset lies before it may have missed a change
// and is told to copy again, while one past it has seen everything that was removed.
import type { Sql } from "postgres"

/** Removes record changes committed before `before`, in chunks per company; the number removed. */
export const pruneRecordChanges = async (sql: Sql, before: Date, chunk = 5_000): Promise<number> => {
  let pruned = 0
  for (;;) {
    const [r] = await sql<{ n: number }[]>`
      with old as (
        select o.resource, o.id
          from service.companies c
          cross join lateral (
            select x.resource, x.id, x.committed_at from service.record_changes x
             where x.company_id = c.id
             order by x.commit_lsn, x.ord
             limit ${chunk}
          ) o
         where o.committed_at < ${before}
         limit ${chunk}
      ), gone as (
        delete from service.record_changes r using old
         where r.resource = old.resource and r.id = old.id and r.committed_at < ${before}
        returning r.company_id, r.commit_lsn, r.ord, r.resource, r.id
      ), top as (
        select distinct on (company_id) company_id, commit_lsn, ord, resource, id from gone
         order by company_id, commit_lsn desc, ord desc, resource collate "C" desc, id desc
      ), kept as (
        insert into service.stream_pruned as p (company_id, commit_lsn, ord, resource, id)
        select company_id, commit_lsn, ord, resource, id from top
        on conflict (company_id) do update
          set commit_lsn = excluded.commit_lsn, ord = excluded.ord, resource = excluded.resource, id = excluded.id, pruned_at = now()
          where (excluded.commit_lsn, excluded.ord, excluded.resource collate "C", excluded.id)
              > (p.commit_lsn, p.ord, p.resource collate "C", p.id)
      )
      select count(*)::int as n from gone`
    pruned += r!.n
    if (r!.n < chunk) return pruned
  }
}
