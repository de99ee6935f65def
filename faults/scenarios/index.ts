import type { Scenario } from '../types.js';
import { abuseScenario } from './abuse.js';
import { badInputScenario } from './badInput.js';
import { consumerKillScenario } from './consumerKill.js';
import { jetstreamConsumerKillScenario } from './jetstreamConsumerKill.js';
import { groupMemberKillScenario } from './groupMemberKill.js';
import { groupRebalanceScenario } from './groupRebalance.js';
import { loadScenario } from './load.js';
import { natsRestartScenario } from './natsRestart.js';
import { networkCutsScenario } from './networkCuts.js';
import { poisonScenario } from './poison.js';
import { postgresTerminateScenario } from './postgresTerminate.js';
import { relaySigkillScenario } from './relaySigkill.js';
import { serverKillScenario } from './serverKill.js';
import { splitBrainScenario } from './splitBrain.js';
import { sqliteDiskFullScenario } from './sqliteDiskFull.js';

/** Every scenario, in the order they run and are reported. */
export const SCENARIOS: readonly Scenario[] = [
  consumerKillScenario('sqlite'),
  consumerKillScenario('postgres'),
  serverKillScenario('sqlite'),
  serverKillScenario('postgres'),
  networkCutsScenario('sqlite'),
  networkCutsScenario('postgres'),
  splitBrainScenario('sqlite'),
  splitBrainScenario('postgres'),
  poisonScenario('sqlite'),
  poisonScenario('postgres'),
  postgresTerminateScenario,
  sqliteDiskFullScenario,
  loadScenario('sqlite'),
  loadScenario('postgres'),
  badInputScenario,
  abuseScenario,
  relaySigkillScenario('sqlite'),
  relaySigkillScenario('postgres'),
  jetstreamConsumerKillScenario,
  natsRestartScenario,
  groupMemberKillScenario('sqlite'),
  groupMemberKillScenario('postgres'),
  groupRebalanceScenario('sqlite'),
  groupRebalanceScenario('postgres'),
];
