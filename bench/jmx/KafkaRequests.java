// The broker's request counts by API key, read over JMX from its own JVM: attaches to the
// pid (the Attach API, same user), starts its local management agent if it has none (no
// port, no restart: the broker keeps running as it was started), then prints one JSON line
// {"Produce": n, ...} of kafka.network RequestMetrics RequestsPerSec counts (summed over
// versions) for each line read on stdin. Run from source: java KafkaRequests.java PID.
import com.sun.tools.attach.VirtualMachine;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.Map;
import java.util.TreeMap;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class KafkaRequests {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String address;
        try {
            address = vm.startLocalManagementAgent();
        } finally {
            vm.detach();
        }
        ObjectName pattern = new ObjectName("kafka.network:type=RequestMetrics,name=RequestsPerSec,*");
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            System.out.println(counts(server, pattern));
            while (in.readLine() != null) {
                System.out.println(counts(server, pattern));
            }
        }
    }

    static String counts(MBeanServerConnection server, ObjectName pattern) throws Exception {
        Map<String, Long> counts = new TreeMap<>();
        for (ObjectName name : server.queryNames(pattern, null)) {
            long count = ((Number) server.getAttribute(name, "Count")).longValue();
            counts.merge(name.getKeyProperty("request"), count, Long::sum);
        }
        StringBuilder json = new StringBuilder("{");
        for (Map.Entry<String, Long> entry : counts.entrySet()) {
            json.append(json.length() > 1 ? ", " : "").append('"').append(entry.getKey()).append("\": ").append(entry.getValue());
        }
        return json.append('}').toString();
    }
}
