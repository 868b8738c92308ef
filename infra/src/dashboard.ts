// The sweeper's dashboard: a row of items and lag for each table, then the functions' invocations
// and errors and what each table left for the next sweep.

import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import { namesEachTable, type Settings } from './resolve';
import type { SweeperView } from './sweeper-view';

/** The sweeper's dashboard, in `sweeper`. */
export function sweeperDashboard(sweeper: SweeperView, settings: Settings): cloudwatch.Dashboard {
  // A row of items and lag for each table (its title naming the table when there are
  // several), then the function's invocations and what each table left for the next sweep.
  const several = namesEachTable(settings);
  const tableRows = sweeper.tables.map((table) => {
    const graph = (name: string, statistic: string) => sweeper.tableMetric(table, name, { statistic });
    const of = several ? `: ${table.tableName}` : '';
    return [
      new cloudwatch.GraphWidget({
        title: `Items deleted / skipped / gone / failed${of}`,
        left: [
          graph('ItemsDeleted', 'Sum'),
          graph('ItemsSkipped', 'Sum'),
          graph('ItemsGone', 'Sum'),
          graph('ItemsFailed', 'Sum'),
        ],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: `Expiry lag (s)${of}`,
        left: [graph('MaxExpiryLagSeconds', 'Maximum'), graph('P99ExpiryLagSeconds', 'Maximum')],
        width: 12,
      }),
    ];
  });
  return new cloudwatch.Dashboard(sweeper, 'Dashboard', {
    widgets: [
      ...tableRows,
      [
        new cloudwatch.GraphWidget({
          title: 'Invocations and errors',
          left:
            sweeper.functions.length === 1
              ? [sweeper.function.metricInvocations(), sweeper.function.metricErrors()]
              : sweeper.functions.flatMap((fn, i) => [
                fn.metricInvocations({ label: `Invocations ${sweeper.shardRanges[i]}` }),
                fn.metricErrors({ label: `Errors ${sweeper.shardRanges[i]}` }),
              ]),
          width: 12,
        }),
        new cloudwatch.GraphWidget({
          title: 'Left for the next sweep',
          left: several
            ? sweeper.tables.map((table) => sweeper.tableMetric(table, 'ItemsLeft', { statistic: 'Sum', label: table.tableName }))
            : [sweeper.metric('ItemsLeft', { statistic: 'Sum' })],
          width: 12,
        }),
      ],
    ],
  });
}
